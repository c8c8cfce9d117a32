#!/usr/bin/env bash
# Writes the seeds of the pem fuzz target into Tools/fuzz/seeds-pem/ with the openssl command:
# a P-256 self-signed certificate like a Nearby identity's (PEM, DER, and OpenSSL's TRUSTED
# CERTIFICATE form), an Ed25519 one with UTF-8 and escaped characters in its subject, a
# two-certificate chain (leaf, then its CA) and a PEM file with a public key block before the
# certificate. Keys are fresh each run, so the files differ every time; the committed ones are
# the seeds. The private keys are thrown away.
#
#     Tools/fuzz/make-seeds-pem.sh [OUTPUT_DIR]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
out="${1:-$here/seeds-pem}"
mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

days=3650
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/p256.key" \
    -subj "/O=Nearby/CN=Build Box" -days "$days" -sha256 \
    -addext "basicConstraints=critical,CA:FALSE" -addext "extendedKeyUsage=serverAuth,clientAuth" \
    -out "$out/p256-self-signed.pem" 2>/dev/null
openssl x509 -in "$out/p256-self-signed.pem" -outform DER -out "$out/p256-self-signed.der"

# UTF-8 and characters RFC 2253 escapes in the subject.
openssl req -x509 -newkey ed25519 -nodes -keyout "$work/ed.key" -utf8 -subj '/O=Nearby\/Lab/CN=tést, "q" <x>;=y' \
    -days "$days" -out "$out/ed25519-self-signed.pem" 2>/dev/null

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/ca.key" \
    -subj "/O=Nearby/CN=Nearby Test CA" -days "$days" -sha256 \
    -addext "basicConstraints=critical,CA:TRUE,pathlen:0" -out "$work/ca.pem" 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/leaf.key" \
    -subj "/CN=leaf.local" -out "$work/leaf.csr" 2>/dev/null
printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n' >"$work/leaf.ext"
openssl x509 -req -in "$work/leaf.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -set_serial 2 \
    -days "$days" -sha256 -extfile "$work/leaf.ext" -out "$work/leaf.pem" 2>/dev/null
cat "$work/leaf.pem" "$work/ca.pem" >"$out/chain-leaf-ca.pem"

# OpenSSL's "trusted certificate" form: the certificate followed by its trust settings.
openssl x509 -in "$out/p256-self-signed.pem" -trustout -addtrust serverAuth -out "$out/p256-trusted.pem"

# Another block (a public key: no private key goes into the seeds), then the certificate:
# only the latter counts.
{ openssl pkey -in "$work/ed.key" -pubout; cat "$out/ed25519-self-signed.pem"; } >"$out/key-then-certificate.pem"

ls -l "$out"
