#!/usr/bin/env bash
# Makes a test certificate authority and certificates signed by it with
# openssl, for trying a secured MoonMQ (README "Securing MoonMQ"):
#
#   scripts/make-certs.sh DIR [NAME...]
#
# writes DIR/ca.pem and DIR/ca-key.pem, and for each NAME (default: broker
# client) DIR/NAME.pem and DIR/NAME-key.pem: an EC P-256 certificate with
# CN=NAME, valid for 127.0.0.1 and localhost, usable as a server and a client
# certificate (a broker presents the same one to its peers). Existing files
# are kept, so a CA made once signs every later certificate. Not for
# production: the CA key sits beside the certificates, unencrypted.
set -euo pipefail

dir=${1:?usage: make-certs.sh DIR [NAME...]}
shift
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(broker client)
mkdir -p "$dir"
cd "$dir"

if [ ! -f ca.pem ]; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
		-keyout ca-key.pem -out ca.pem -subj "/CN=MoonMQ test CA" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
fi
for n in "${names[@]}"; do
	[ -f "$n.pem" ] && continue
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$n-key.pem" \
		-out "$n.csr" -subj "/CN=$n" 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=digitalSignature\n' >"$n.ext"
	openssl x509 -req -in "$n.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 365 \
		-extfile "$n.ext" -out "$n.pem" 2>/dev/null
	rm -f "$n.csr" "$n.ext"
done
echo "certificates in $dir: ca.pem, $(printf '%s.pem ' "${names[@]}")(keys beside them)"
