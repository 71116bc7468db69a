#!/usr/bin/env python3
"""Checks deploy/ is consistent with itself and with the code.

- Every Kubernetes manifest and Prometheus config parses as YAML, every JSON
  file (Grafana dashboard, Prometheus targets) as JSON.
- ps-server and ps-scheduler pods carry the prometheus.io/scrape and
  prometheus.io/port annotations that prometheus-kubernetes.yml keys on, pass
  the same port as --metrics_port and expose it as a container port.
- Every psdb_ metric a Grafana panel queries is one the code exports (a
  string literal in rpc/**), so a renamed metric cannot leave a dead panel.
- promtool (Debian's prometheus) accepts prometheus-static.yml.

Usage: check_deploy.py REPO_ROOT. Prints what it checked; exit 1 on the
first inconsistency, naming the file.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import yaml


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def pod_template(doc):
    return doc["spec"]["template"]


def check_scrape_annotations(path, kind, binary):
    docs = list(yaml.safe_load_all(open(path)))
    workloads = [d for d in docs if d and d.get("kind") == kind]
    if len(workloads) != 1:
        fail(f"{path}: expected one {kind}")
    tmpl = pod_template(workloads[0])
    ann = tmpl["metadata"].get("annotations", {})
    if ann.get("prometheus.io/scrape") != "true":
        fail(f'{path}: pod template lacks prometheus.io/scrape: "true"')
    port = ann.get("prometheus.io/port")
    if not isinstance(port, str) or not port.isdigit():
        fail(f"{path}: prometheus.io/port must be a quoted number, got {port!r}")
    (container,) = [c for c in tmpl["spec"]["containers"]
                    if c.get("command") == [binary]]
    if f"--metrics_port={port}" not in container.get("args", []):
        fail(f"{path}: {binary} args lack --metrics_port={port}")
    if int(port) not in [p["containerPort"] for p in container.get("ports", [])]:
        fail(f"{path}: container port {port} not exposed")
    print(f"ok {path}: {binary} scraped on :{port}/metrics")


def exported_metrics(root):
    names = set()
    for path in glob.glob(os.path.join(root, "rpc", "**", "*.cc"),
                          recursive=True):
        names.update(re.findall(r'"(psdb_[a-z0-9_]+)"', open(path).read()))
    return names


def check_dashboard(path, exported):
    dash = json.load(open(path))
    exprs = []
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            exprs.append(target["expr"])
    if not exprs:
        fail(f"{path}: no queries")
    used = set()
    for expr in exprs:
        used.update(re.findall(r"\b(psdb_[a-z0-9_]+)", expr))
    for name in sorted(used):
        base = re.sub(r"_(bucket|count|sum)$", "", name)
        if name not in exported and base not in exported:
            fail(f"{path}: panel queries {name}, which no code exports")
    print(f"ok {path}: {len(dash['panels'])} panels, {len(exprs)} queries "
          f"over {len(used)} metrics, all exported")


def main():
    root = sys.argv[1]
    deploy = os.path.join(root, "deploy")
    for path in sorted(glob.glob(os.path.join(deploy, "**", "*.y*ml"),
                                 recursive=True)):
        list(yaml.safe_load_all(open(path)))
        print(f"ok {path}: YAML")
    for path in sorted(glob.glob(os.path.join(deploy, "**", "*.json"),
                                 recursive=True)):
        json.load(open(path))
        print(f"ok {path}: JSON")

    check_scrape_annotations(os.path.join(deploy, "servers.yaml"),
                             "StatefulSet", "ps-server")
    check_scrape_annotations(os.path.join(deploy, "serving.yaml"),
                             "StatefulSet", "ps-server")
    check_scrape_annotations(os.path.join(deploy, "scheduler.yaml"),
                             "Deployment", "ps-scheduler")

    k8s = yaml.safe_load(open(os.path.join(
        deploy, "prometheus", "prometheus-kubernetes.yml")))
    (job,) = k8s["scrape_configs"]
    if job["kubernetes_sd_configs"] != [{"role": "pod"}]:
        fail("prometheus-kubernetes.yml: expected pod discovery")
    keeps = [r for r in job["relabel_configs"] if r.get("action") == "keep"]
    if keeps[0]["source_labels"] != [
            "__meta_kubernetes_pod_annotation_prometheus_io_scrape"]:
        fail("prometheus-kubernetes.yml: no keep on prometheus.io/scrape")
    print("ok prometheus-kubernetes.yml: annotation-based pod discovery")

    check_dashboard(os.path.join(deploy, "grafana", "psdb-dashboard.json"),
                    exported_metrics(root))

    promtool = shutil.which("promtool")
    if promtool:
        subprocess.run([promtool, "check", "config",
                        os.path.join(deploy, "prometheus",
                                     "prometheus-static.yml")], check=True)
    else:
        print("promtool not installed (Debian: prometheus); not run")


if __name__ == "__main__":
    main()
