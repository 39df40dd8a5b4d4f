# syntax=docker/dockerfile:1
#
# The tether binary in a distroless image; by default it runs the controller
# (config/default deploys it). Build for another platform with
#   docker buildx build --platform linux/arm64 --build-arg VERSION=v0.1.0 .

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath \
      -ldflags "-s -w -X github.com/tether-dev/tether/internal/cli.Version=${VERSION}" \
      -o /tether ./cmd/tether

FROM gcr.io/distroless/static:nonroot
COPY --from=build /tether /tether
USER 65532:65532
ENTRYPOINT ["/tether"]
CMD ["controller"]
