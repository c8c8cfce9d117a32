#!/usr/bin/env bash
# Makes the certificates and CRLs of this directory with the openssl CLI (OpenSSL 3):
# weak keys and digests, and CRLs (current, expired, forged, from a root), all with fixed
# dates so the tests judge them at a fixed time (2030-01-01) with stable verdicts.
# Keys change at every run; nothing else does. Run it from anywhere: bash make.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -f ./*.pem

cat >"$work/ca.cnf" <<CNF
[ ca ]
default_ca = fixture_ca
[ fixture_ca ]
database = $work/index.txt
new_certs_dir = $work/issued
serial = $work/serial
crlnumber = $work/crlnumber
default_md = sha256
policy = fixture_policy
unique_subject = no
copy_extensions = none
[ fixture_policy ]
organizationName = supplied
commonName = supplied
[ req ]
distinguished_name = dn
[ dn ]
[ ext_ca ]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[ ext_leaf ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth, clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[ crl_ext ]
authorityKeyIdentifier = keyid:always
CNF
mkdir -p "$work/issued"
: >"$work/index.txt"
echo 1000 >"$work/serial"
echo 01 >"$work/crlnumber"

openssl dsaparam -out "$work/dsa1024.pem" 1024 2>/dev/null

# make NAME CN KEY(ec:CURVE|rsa:BITS|dsa) ISSUER(-|name) PROFILE(ca|leaf) [DIGEST]
make() {
  local name=$1 cn=$2 key=$3 issuer=$4 profile=$5 digest=${6:-sha256} newkey
  case $key in
    ec:*) newkey=(-newkey ec -pkeyopt "ec_paramgen_curve:${key#ec:}") ;;
    rsa:*) newkey=(-newkey "$key") ;;
    dsa) newkey=(-newkey "dsa:$work/dsa1024.pem") ;;
  esac
  openssl req -config "$work/ca.cnf" -new "${newkey[@]}" -nodes -keyout "$work/$name.key" \
    -out "$work/$name.csr" -subj "/O=Nearby fixtures/CN=$cn" 2>/dev/null
  local signer=(-cert "$work/$issuer.pem" -keyfile "$work/$issuer.key")
  [[ $issuer == - ]] && signer=(-selfsign -keyfile "$work/$name.key")
  openssl ca -batch -config "$work/ca.cnf" -notext -preserveDN -md "$digest" -in "$work/$name.csr" \
    -out "$work/$name.pem" -startdate 200101000000Z -enddate 391231000000Z \
    -extfile "$work/ca.cnf" -extensions "ext_$profile" "${signer[@]}" 2>/dev/null
  cp "$work/$name.pem" "$name.pem"
}

# gencrl NAME ISSUER LAST NEXT [REVOKED-CERT REASON]...   ($EXTENSIONS: the CRL's extensions section,
# or none: a forger leaves out the authority key identifier that would name its own key)
gencrl() {
  local name=$1 issuer=$2 last=$3 next=$4 extensions=()
  shift 4
  [[ -n ${EXTENSIONS-crl_ext} ]] && extensions=(-crlexts "${EXTENSIONS-crl_ext}")
  : >"$work/index.txt"
  while (($#)); do
    local serial subject
    serial=$(openssl x509 -in "$work/$1.pem" -noout -serial | cut -d= -f2)
    subject=$(openssl x509 -in "$work/$1.pem" -noout -subject -nameopt compat | sed 's/^subject=//')
    printf 'R\t391231000000Z\t240601000000Z,%s\t%s\tunknown\t%s\n' "$2" "$serial" "$subject" >>"$work/index.txt"
    shift 2
  done
  openssl ca -batch -config "$work/ca.cnf" -gencrl -cert "$work/$issuer.pem" -keyfile "$work/$issuer.key" \
    -crl_lastupdate "$last" -crl_nextupdate "$next" "${extensions[@]}" -out "$name.pem" 2>/dev/null
}

make root "Fixture Root" ec:P-256 - ca
make intermediate "Fixture Intermediate" ec:P-256 root ca
make leaf "Fixture Leaf" ec:P-256 intermediate leaf
make other-leaf "Fixture Other Leaf" ec:P-256 intermediate leaf
make revoked-intermediate "Fixture Revoked Intermediate" ec:P-256 root ca
make leaf-under-revoked "Fixture Leaf Under Revoked" ec:P-256 revoked-intermediate leaf
# Weak keys and digests.
make rsa1024-root "Weak RSA-1024 Root" rsa:1024 - ca
make leaf-under-rsa1024 "Leaf Under RSA-1024" ec:P-256 rsa1024-root leaf
make p192-root "Weak P-192 Root" ec:P-192 - ca
make leaf-under-p192 "Leaf Under P-192" ec:P-256 p192-root leaf
make rsa1024-leaf "RSA-1024 Leaf" rsa:1024 intermediate leaf
make p192-leaf "P-192 Leaf" ec:P-192 intermediate leaf
make dsa1024-leaf "DSA-1024 Leaf" dsa intermediate leaf
make sha1-leaf "SHA-1 Signed Leaf" ec:P-256 intermediate leaf sha1
# Strong enough: the boundary (P-224, RSA-2048) and a root that signed itself with SHA-1.
make p224-leaf "P-224 Leaf" ec:P-224 intermediate leaf
make rsa2048-root "RSA-2048 Root" rsa:2048 - ca sha1
make leaf-under-rsa2048 "Leaf Under RSA-2048" rsa:2048 rsa2048-root leaf
# MD5 needs an RSA signer (there is no ECDSA with MD5).
make md5-leaf "MD5 Signed Leaf" ec:P-256 rsa2048-root leaf md5
# A certificate with the intermediate's very name and another key: it forges CRLs.
make twin-intermediate "Fixture Intermediate" ec:P-256 - ca

gencrl intermediate-current intermediate 20250101000000Z 20350101000000Z other-leaf keyCompromise
gencrl intermediate-older intermediate 20240601000000Z 20350101000000Z
gencrl intermediate-expired intermediate 20250101000000Z 20260101000000Z
EXTENSIONS= gencrl intermediate-forged twin-intermediate 20250101000000Z 20350101000000Z
gencrl root-current root 20250101000000Z 20350101000000Z revoked-intermediate cACompromise
echo "made $(ls ./*.pem | wc -l) files in $(pwd)"
