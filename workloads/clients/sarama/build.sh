#!/usr/bin/env bash
# Builds the sarama producer driver (producer.go) into the path given as $1, from Debian's
# packages only: golang-go (Go 1.19) and golang-github-shopify-sarama-dev (sarama 1.22.1 and its
# dependencies under /usr/share/gocode). GOPATH mode, no module proxy, no network but apt.
set -euo pipefail

out="${1:?usage: build.sh OUTPUT_PATH}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
gopath=/usr/share/gocode
pkgs=(golang-go golang-github-shopify-sarama-dev)

install=
if ! command -v go >/dev/null 2>&1 || [ ! -f "$gopath/src/github.com/Shopify/sarama/async_producer.go" ]; then
    install=yes
fi
what="building $out with go build (GOPATH=$gopath, GO111MODULE=off, CGO_ENABLED=0)"
if [ -n "$install" ]; then what="installing ${pkgs[*]} (apt-get), then $what"; fi
echo "sarama driver: $what" >&2

if [ -n "$install" ]; then
    if [ "$(id -u)" -eq 0 ]; then sudo=(); elif command -v sudo >/dev/null 2>&1; then sudo=(sudo -n); else
        echo "sarama driver: Go or sarama's source is missing and this user cannot run apt-get; install them: apt-get install -y ${pkgs[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    if ! { "${sudo[@]}" apt-get install -y -qq "${pkgs[@]}" >&2 ||
           { "${sudo[@]}" apt-get update -qq >&2 && "${sudo[@]}" apt-get install -y -qq "${pkgs[@]}" >&2; }; }; then
        echo "sarama driver: could not install ${pkgs[*]} with apt-get (it needs a Debian bookworm package source)" >&2
        exit 1
    fi
fi
if ! command -v go >/dev/null 2>&1 || [ ! -f "$gopath/src/github.com/Shopify/sarama/async_producer.go" ]; then
    echo "sarama driver: still no go or no sarama source in $gopath/src/github.com/Shopify/sarama after installing ${pkgs[*]}" >&2
    exit 1
fi

# The version the ready line reports: the Debian package's upstream version (1.22.1-1 -> 1.22.1).
version="$(dpkg-query -W -f='${Version}' golang-github-shopify-sarama-dev 2>/dev/null || echo unknown)"
version="${version%-*}"

mkdir -p "$(dirname "$out")"
# CGO_ENABLED=0: a static binary without gcc; it only drops sarama's zstd codec (unused here).
# GOCACHE: go's default needs $HOME; fall back to a temporary directory without it.
if [ -z "${HOME:-}" ] && [ -z "${GOCACHE:-}" ]; then export GOCACHE="${TMPDIR:-/tmp}/sarama-driver-gocache"; fi
GOPATH="$gopath" GO111MODULE=off GOFLAGS= CGO_ENABLED=0 \
    go build -trimpath -ldflags "-X main.saramaVersion=$version" -o "$out" "$here/producer.go"
