# keysvc as a small static image: `docker build -t idemhook/keysvc .`
# Multi-stage: the Go toolchain builds a static binary (no cgo), which runs as
# a non-root user on a distroless base with nothing else in it.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The planner page's WebAssembly module is not committed, and the image has no
# Go toolchain to build it when the page is first asked for: build it here and
# carry it in the binary (-tags planner_embed; docs/planner.md).
RUN go generate ./internal/planner && CGO_ENABLED=0 go build -trimpath -tags planner_embed -ldflags="-s -w" -o /out/keysvc ./cmd/keysvc

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/keysvc /keysvc
USER nonroot:nonroot
# Listen on every interface inside the container; publish the port on the
# host's loopback (see docker-compose.yml) or behind a reverse proxy.
ENV KEYSVC_ADDR=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/keysvc"]
