# Builds the CAPKV manager image: make docker-build IMG=... VERSION=...
#
# Needs BuildKit (docker's default builder). The builder stage runs on the
# build machine's platform and cross-compiles for TARGETOS/TARGETARCH (set
# from --platform) without cgo, so the binary is static and runs on
# distroless.

FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev

WORKDIR /workspace
# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download

COPY main.go main.go
COPY api/ api/
COPY controllers/ controllers/
COPY pkg/ pkg/

RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath \
    -ldflags "-X github.com/capkv/cluster-api-provider-kubevirt/pkg/common/version.Version=${VERSION}" \
    -o manager .

FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /workspace/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
