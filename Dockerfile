# syntax=docker/dockerfile:1
# The supported way to build configward's image is `make image`: it needs no
# Docker engine, builds linux/amd64 and linux/arm64 from scratch with
# reproducible timestamps and OCI labels, and writes bin/configward-image.tar
# (see the Makefile). This Dockerfile stays for people who build with Docker:
#   docker build --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg COMMIT=$(git rev-parse HEAD) -t configward .
# Multi-stage: build a static binary, ship it on distroless as non-root.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY internal/ internal/
COPY policies/ policies/
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/configward ./cmd/configward

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/configward /configward
USER 65532:65532
ENTRYPOINT ["/configward"]
