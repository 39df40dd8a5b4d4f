# syntax=docker/dockerfile:1
#
# An alternative for those who build with a container engine. The canonical
# image is the one `make image` builds without an engine (see
# docs/install.md): reproducible, tested, with the OCI labels. This file
# gives a like image from distroless, e.g.
#   docker buildx build --platform linux/arm64 \
#     --build-arg VERSION="$(git describe --tags --always --dirty)" \
#     --build-arg COMMIT="$(git rev-parse HEAD)" \
#     --build-arg SOURCE_DATE_EPOCH="$(git log -1 --format=%ct)" .

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
ARG COMMIT=
ARG SOURCE_DATE_EPOCH=
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/tether-dev/tether/internal/version.Version=${VERSION} -X github.com/tether-dev/tether/internal/version.Commit=${COMMIT} -X github.com/tether-dev/tether/internal/version.Epoch=${SOURCE_DATE_EPOCH}" \
      -o /tether ./cmd/tether

FROM gcr.io/distroless/static:nonroot
COPY --from=build /tether /tether
USER 65532:65532
ENTRYPOINT ["/tether"]
CMD ["controller"]
