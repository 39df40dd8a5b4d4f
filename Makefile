# tether — the project's front door. See README.md.
GO      ?= go
BIN     := bin
ENV_DIR := .tether-env
PKGS    := ./...
# The packages whose tests run on the OpenStack test world, run again on its
# second release line (2025.1); the CLI's only for its OpenStack tests.
OPENSTACK_PKGS := ./test/openstack/ ./internal/openstack/... ./internal/testing/openstack/

# What a build says it is (tether version), from git. SOURCE_DATE_EPOCH, the
# commit's time, stands for the build date and every timestamp in the image
# and archives, so two builds of one commit are the same bytes.
VERSION           ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT            ?= $(shell git rev-parse HEAD 2>/dev/null)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
VERSION_PKG       := github.com/tether-dev/tether/internal/version
LDFLAGS           := -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Commit=$(COMMIT) -X $(VERSION_PKG).Epoch=$(SOURCE_DATE_EPOCH)

.PHONY: all build binaries image dist controlplane node kubevirt kubevirt-node openstack demo-openstack test test-openstack-2025.1 unit lint vet fmt demo env-up env-down bench bench-cluster bench-large bench-openstack clean

all: build

## build: the tether binary (also the kubectl plugin kubectl-tether, with kubectl_complete-tether for its completion), the emulator and the env launcher
build:
	$(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(BIN)/tether ./cmd/tether
	ln -sf tether $(BIN)/kubectl-tether
	install -m 0755 hack/kubectl_complete-tether $(BIN)/kubectl_complete-tether
	$(GO) build -o $(BIN)/kubevirt-emulator ./cmd/kubevirt-emulator
	$(GO) build -o $(BIN)/tether-env ./cmd/tether-env

## image: the container image ghcr.io/tether-dev/tether:$(VERSION) for linux/amd64 and linux/arm64, built without a container engine: an OCI layout in bin/image and a docker-loadable tarball for this machine in bin/
image:
	$(GO) run ./cmd/tether-release image -version "$(VERSION)" -commit "$(COMMIT)" -epoch "$(SOURCE_DATE_EPOCH)" -out $(BIN)

## dist: the kubectl plugin archives for a release (VERSION=vX.Y.Z) and their krew manifest in bin/dist
dist:
	$(GO) run ./cmd/tether-release dist -version "$(VERSION)" -commit "$(COMMIT)" -epoch "$(SOURCE_DATE_EPOCH)" -out $(BIN)/dist

## controlplane: build etcd, kube-apiserver, kube-controller-manager from Go modules (cached outside the checkout)
controlplane:
	@hack/controlplane.sh >/dev/null

## node: build kubelet and kube-scheduler from Go modules (cached outside the checkout) and install containerd, runc, the CNI plugins and iptables from Debian (root) for the test world's real node
node:
	@hack/node.sh --host
	@hack/node.sh >/dev/null

## kubevirt: build real KubeVirt's virt-api and virt-controller, v1.9 and v1.7 (and kwok), from Go modules (cached outside the checkout)
kubevirt:
	@hack/kubevirt.sh >/dev/null
	@hack/kubevirt.sh tools/kubevirt-v1.7 >/dev/null

## kubevirt-node: build real KubeVirt's node side, v1.9 (virt-handler, virt-launcher and its helpers, container-disk), from Go modules, and as root its launcher and handler images from Debian 12's libvirt and QEMU (cached outside the checkout; binaries and test build it)
kubevirt-node:
	@hack/kubevirt-node.sh >/dev/null

## openstack: install Nova, Cinder and Placement from Debian's packages (root, the first time): Zed on the host, and 2025.1 in a Debian 13 root built with debootstrap; extract their api-paste.ini files and create empty databases, cached outside the checkout, for the OpenStack test world (hack/openstack.sh). A host that cannot build the root (not root) gets one line, and the 2025.1 tests skip
openstack:
	@hack/openstack.sh install >/dev/null
	@hack/openstack.sh install --release 2025.1 >/dev/null || [ $$? = 3 ]

## binaries: the control plane, the node, KubeVirt (virt-api, virt-controller; then its node side and, as root, its images) and tether, one after the other: the first three build from the same Kubernetes modules, so each reuses what the one before it compiled (built side by side, each compiles them again)
binaries:
	@$(MAKE) --no-print-directory controlplane
	@$(MAKE) --no-print-directory node
	@$(MAKE) --no-print-directory kubevirt
	@$(MAKE) --no-print-directory kubevirt-node
	@$(MAKE) --no-print-directory build

## test: lint, unit tests and integration tests on the real local control plane, with the KubeVirt emulator, with real KubeVirt, on a real node (kubelet, containerd), with real virt-handler and virt-launcher booting guests there and on real OpenStack (Nova, Cinder; Zed and 2025.1). The first time, it builds the control plane, the node and KubeVirt one after the other (binaries) while the OpenStack packages and root download and install
test: lint
	@$(MAKE) --no-print-directory -j2 -Oline openstack binaries
	TETHER_CONTROLPLANE_BIN="$$(hack/controlplane.sh)" TETHER_NODE_BIN="$$(hack/node.sh)" TETHER_KUBEVIRT_DIR="$$(hack/kubevirt.sh)" $(GO) test -count=1 -timeout 40m $(PKGS)
	$(MAKE) --no-print-directory test-openstack-2025.1

## test-openstack-2025.1: the OpenStack tests again, on the second release line (Debian 13's OpenStack 2025.1; make test runs it)
test-openstack-2025.1: openstack
	TETHER_OPENSTACK_RELEASE=2025.1 $(GO) test -count=1 -timeout 30m $(OPENSTACK_PKGS)
	TETHER_OPENSTACK_RELEASE=2025.1 $(GO) test -count=1 -timeout 30m -run '^TestOpenStack' ./internal/cli/

## unit: the pure tests only (no control plane)
unit:
	$(GO) test -short -count=1 $(PKGS)

## lint: gofmt and go vet
lint: vet
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

## env-up: start a persistent local environment (control plane + KubeVirt emulator) in the background
env-up: controlplane build
	TETHER_CONTROLPLANE_BIN="$$(hack/controlplane.sh)" $(BIN)/tether-env up --dir $(ENV_DIR)

## env-down: stop it and remove its state
env-down:
	@if [ -x $(BIN)/tether-env ]; then $(BIN)/tether-env down --dir $(ENV_DIR); else $(GO) run ./cmd/tether-env down --dir $(ENV_DIR); fi

KUBEVIRT ?= emulator

## demo: the main job on the local environment (KUBEVIRT=real: on real KubeVirt instead of the emulator; KUBEVIRT=handler: also real virt-handler on a real node, whose guest sees its orphan go; root)
demo: controlplane build
	@if [ "$(KUBEVIRT)" = real ] || [ "$(KUBEVIRT)" = handler ]; then hack/kubevirt.sh >/dev/null; fi
	@if [ "$(KUBEVIRT)" = handler ]; then hack/node.sh --host && hack/node.sh >/dev/null && hack/kubevirt-node.sh >/dev/null; fi
	TETHER_CONTROLPLANE_BIN="$$(hack/controlplane.sh)" KUBEVIRT="$(KUBEVIRT)" hack/demo.sh

## demo-openstack: tether openstack audit and fix on real Nova and Cinder (the OpenStack test world), with the four kinds of drift seeded
demo-openstack: openstack build
	hack/demo-openstack.sh

## bench: benchmarks of the pure checks
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...

## bench-cluster: audit and controller figures on the local control plane (wall time, API requests, memory), storage checks included
bench-cluster: controlplane
	TETHER_CONTROLPLANE_BIN="$$(hack/controlplane.sh)" $(GO) run ./cmd/tether-bench -mode audit -vmis 100,1000
	TETHER_CONTROLPLANE_BIN="$$(hack/controlplane.sh)" $(GO) run ./cmd/tether-bench -mode controller -vmis 1000,5000
	TETHER_CONTROLPLANE_BIN="$$(hack/controlplane.sh)" $(GO) run ./cmd/tether-bench -mode storage -volumes 2000,10000 -window 60s

## bench-large: the audit at 10k VMIs against the list-and-get loop, then 50k and 100k (time and peak RSS; about 30 minutes)
bench-large: controlplane
	TETHER_CONTROLPLANE_BIN="$$(hack/controlplane.sh)" $(GO) run ./cmd/tether-bench -mode audit -vmis 10000,50000,100000 -runs 1

## bench-openstack: tether openstack audit against the per-server loop at 1,000 servers and 2,000 volumes, 1% of the attachments drifted, in an OpenStack test world of its own (most of the time is seeding)
bench-openstack: openstack
	$(GO) run ./cmd/tether-bench -mode openstack -servers 1000 -volumes 2000 -drift 0.01 -runs 3

clean:
	rm -rf $(BIN)
