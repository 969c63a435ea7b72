#!/bin/sh
# The compose stack's supervisor certificates, made once at first start into the `tls` volume: a CA, and a
# server certificate per simulated GPU host under the name the layout gives it (examples/compose.layout.json),
# plus localhost for the host's own health check. Keys are readable by their owner only (the supervisor refuses
# others). Later starts keep what is there: delete the volume to make new ones.
set -eu
dir=${HARU_TLS_DIR:-/app/.haru/tls}
cd "$dir"
if [ -s ca.pem ]; then
  echo "supervisor certificates already in $dir"
  exit 0
fi
umask 077
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 825 -subj '/CN=Haru compose CA' 2>/dev/null
for host in sim-east sim-west; do
  openssl req -newkey rsa:2048 -nodes -keyout "$host.key" -out "$host.csr" -subj "/CN=$host" 2>/dev/null
  printf 'subjectAltName=DNS:%s,DNS:localhost\n' "$host" >"$host.ext"
  openssl x509 -req -in "$host.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$host.pem" -days 825 \
    -extfile "$host.ext" 2>/dev/null
  rm "$host.csr" "$host.ext"
done
chmod 0644 ca.pem sim-east.pem sim-west.pem
echo "supervisor certificates made in $dir"
