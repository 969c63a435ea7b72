#!/bin/sh
# Ensures the namespace and Haru's search attributes exist (the worker also registers them when missing).
set -eu
ns="${DEFAULT_NAMESPACE:-default}"
until temporal operator cluster health --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1; do echo 'waiting for temporal'; sleep 1; done
temporal operator namespace describe --namespace "$ns" --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1 ||
  temporal operator namespace create --namespace "$ns" --retention 7d --address "$TEMPORAL_ADDRESS"
for attr in HaruFleet HaruFleetSlug HaruDomain HaruDomainSlug HaruOperation; do
  temporal operator search-attribute create --namespace "$ns" --name "$attr" --type Keyword --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1 || true
done
echo "namespace $ns ready"
