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
- Every Kubernetes document has a known (apiVersion, kind); every container
  (and exec probe) runs a psdb binary or etcd.
- Every psdb container starts: the built binary, run with the manifest's
  args ($(VAR) expanded as Kubernetes does) plus --dry_run and the
  manifest's environment (env, fieldRefs given their pod's values, and the
  referenced ConfigMaps), exits 0; where the dry run says which PS_*
  variables it reads (ps-server, ps-train), every PS_* the manifest passes
  is one of them. A dry run that refuses a bad flag is checked too, so
  "exit 0" means something.
- Exec probes name flags the binary has (--helpfull); etcd's flags are ones
  `etcd --help` lists.
- Sizes agree: servers.yaml replicas = PS_SERVER_NUM, workers.yaml
  completions = parallelism = PS_WORKER_NUM, etcd's --initial-cluster names
  exactly the StatefulSet's pods, and ps-scheduler's --etcd names etcd's
  members or its client Service.

Usage: check_deploy.py REPO_ROOT BIN_DIR (BIN_DIR holds the built
ps-scheduler, ps-server, ps-train and ps-dump). Prints what it checked;
exit 1 on the first inconsistency, naming the file.
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


# The (apiVersion, kind) pairs the manifests may use.
KNOWN_KINDS = {
    ("v1", "Service"), ("v1", "ConfigMap"), ("v1", "PersistentVolumeClaim"),
    ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"),
    ("batch/v1", "Job"),
}
PSDB_BINARIES = ("ps-scheduler", "ps-server", "ps-train", "ps-dump")


def manifests(deploy):
    """(path, doc) of every Kubernetes document under deploy/ (not the
    Prometheus configs)."""
    out = []
    for path in sorted(glob.glob(os.path.join(deploy, "*.yaml"))):
        for doc in yaml.safe_load_all(open(path)):
            if doc is not None:
                out.append((path, doc))
    return out


def pod_spec(doc):
    spec = doc.get("spec", {})
    if "template" in spec:
        return spec["template"]["spec"]
    return None


def check_kinds(docs):
    for path, doc in docs:
        pair = (doc.get("apiVersion"), doc.get("kind"))
        if pair not in KNOWN_KINDS:
            fail(f"{path}: unknown (apiVersion, kind) {pair}; known: "
                 f"{sorted(KNOWN_KINDS)}")
        if not doc.get("metadata", {}).get("name"):
            fail(f"{path}: {pair[1]} without metadata.name")
    print(f"ok deploy/*.yaml: {len(docs)} documents, every (apiVersion, "
          f"kind) known")


def config_maps(docs):
    return {d["metadata"]["name"]: d.get("data", {}) for _, d in docs
            if d["kind"] == "ConfigMap"}


def field_value(doc, field_path):
    """What a downward-API fieldRef reads in the workload's first pod."""
    name = doc["metadata"]["name"]
    if field_path == "metadata.name":
        return f"{name}-0"
    if field_path == "status.podIP":
        return "10.0.0.10"
    if field_path == "metadata.namespace":
        return "default"
    if "job-completion-index" in field_path:
        return "0"
    fail(f"{name}: no stand-in for fieldRef {field_path}")


def expand(value, env):
    """Kubernetes' $(VAR) expansion: defined names are replaced, others
    left as written; $$ escapes."""
    def sub(m):
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, value)


def container_env(path, doc, container, maps):
    """The container's environment as Kubernetes builds it: envFrom first,
    then env in order (each may use the ones before)."""
    env = {}
    for src in container.get("envFrom", []):
        ref = src.get("configMapRef", {}).get("name")
        if ref not in maps:
            fail(f"{path}: envFrom names ConfigMap {ref!r}, which no file "
                 f"under deploy/ defines")
        env.update({k: str(v) for k, v in maps[ref].items()})
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = expand(str(e["value"]), env)
        elif "fieldRef" in e.get("valueFrom", {}):
            env[e["name"]] = field_value(doc, e["valueFrom"]["fieldRef"][
                "fieldPath"])
        else:
            fail(f"{path}: env {e['name']}: only value and fieldRef are "
                 f"understood here")
    return env


def workloads(docs):
    """(path, doc, container) of every container of every pod template."""
    for path, doc in docs:
        spec = pod_spec(doc)
        if spec is None:
            continue
        for c in spec.get("initContainers", []) + spec["containers"]:
            yield path, doc, c


def probe_commands(container):
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        cmd = container.get(probe, {}).get("exec", {}).get("command")
        if cmd:
            yield probe, cmd


def run(argv, env=None):
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    # The sanitizer settings of the build under test, if any.
    for k, v in os.environ.items():
        if k.endswith("SAN_OPTIONS"):
            base[k] = v
    base.update(env or {})
    return subprocess.run(argv, env=base, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120)


def knows_flag(binary, flag):
    out = run([binary, "--helpfull"]).stdout
    return re.search(r"-" + re.escape(flag) + r"\b", out) is not None


def check_commands(docs):
    for path, doc, c in workloads(docs):
        cmd = c.get("command")
        if not cmd or len(cmd) != 1 or cmd[0] not in PSDB_BINARIES + (
                "etcd",):
            fail(f"{path}: container {c['name']} runs {cmd!r}; expected "
                 f"[one of {', '.join(PSDB_BINARIES)}, etcd] with its "
                 f"flags in args (no shell: the flags are checked)")
        if c.get("image") != "psdb:latest":
            fail(f"{path}: container {c['name']} image {c.get('image')!r}; "
                 f"the Dockerfile builds psdb:latest")
        for probe, pcmd in probe_commands(c):
            if pcmd[0] not in PSDB_BINARIES:
                fail(f"{path}: {probe} runs {pcmd[0]!r}, not a psdb binary")
    print("ok deploy/*.yaml: every container runs a psdb binary or etcd "
          "from psdb:latest")


def check_dry_runs(docs, bin_dir):
    maps = config_maps(docs)
    self_tested = False
    for path, doc, c in workloads(docs):
        binary = c["command"][0]
        if binary == "etcd":
            continue
        exe = os.path.join(bin_dir, binary)
        if not os.access(exe, os.X_OK):
            fail(f"{exe}: not built")
        env = container_env(path, doc, c, maps)
        args = [expand(str(a), env) for a in c.get("args", [])]
        where = f"{path}: {doc['metadata']['name']}/{c['name']}"
        r = run([exe] + args + ["--dry_run"], env)
        if r.returncode != 0:
            fail(f"{where}: {binary} {' '.join(args)} --dry_run with "
                 f"{sorted(k for k in env if k.startswith('PS_'))} exits "
                 f"{r.returncode}:\n{r.stdout}")
        reads = re.search(r"^\s*PS_\* read:(.*)$", r.stdout, re.M)
        if reads is not None:
            read = set(re.findall(r"\b(PS_[A-Z0-9_]+)=", reads.group(1)))
            ignored = sorted(k for k in env
                             if k.startswith("PS_") and k not in read)
            if ignored:
                fail(f"{where}: {binary} does not read {ignored} "
                     f"(its dry run: {r.stdout.strip()})")
        for probe, pcmd in probe_commands(c):
            for arg in pcmd[1:]:
                flag = re.match(r"--?([A-Za-z0-9_]+)", arg)
                if flag is None or not knows_flag(exe, flag.group(1)):
                    fail(f"{where}: {probe} passes {arg!r}, which "
                         f"{binary} does not know")
        print(f"ok {where}: {binary} --dry_run accepts its args and "
              f"environment")
        if binary == "ps-server" and not self_tested:
            bad = run([exe] + args + ["--sync_mode=sometimes", "--dry_run"],
                      env)
            if bad.returncode == 0:
                fail(f"{exe} --dry_run accepted --sync_mode=sometimes")
            self_tested = True


def check_etcd_flags(docs):
    etcd = shutil.which("etcd")
    if etcd is None:
        fail("etcd not installed (Debian: etcd-server); dev.sh installs it")
    known = set(re.findall(r"^\s+--([a-z0-9-]+)", run([etcd, "--help"]).stdout,
                           re.M))
    for path, doc, c in workloads(docs):
        if c["command"] != ["etcd"]:
            continue
        for arg in c.get("args", []):
            m = re.match(r"--([a-z0-9-]+)(=|$)", str(arg))
            if m is None or m.group(1) not in known:
                fail(f"{path}: etcd argument {arg!r} is not a flag "
                     f"`etcd --help` lists")
        print(f"ok {path}: {len(c.get('args', []))} etcd flags, all known "
              f"to {etcd}")


def flag_value(container, name):
    for a in container.get("args", []):
        if str(a).startswith(f"--{name}="):
            return str(a).split("=", 1)[1]
    return None


def check_sizes(docs):
    maps = config_maps(docs)
    cluster = maps["psdb-cluster"]
    by_name = {(d["kind"], d["metadata"]["name"]): (p, d) for p, d in docs}
    path, servers = by_name[("StatefulSet", "psdb-server")]
    if servers["spec"]["replicas"] != int(cluster["PS_SERVER_NUM"]):
        fail(f"{path}: replicas {servers['spec']['replicas']} != "
             f"PS_SERVER_NUM {cluster['PS_SERVER_NUM']}")
    path, job = by_name[("Job", "psdb-train")]
    for field in ("completions", "parallelism"):
        if job["spec"][field] != int(cluster["PS_WORKER_NUM"]):
            fail(f"{path}: {field} {job['spec'][field]} != PS_WORKER_NUM "
                 f"{cluster['PS_WORKER_NUM']}")
    path, etcd = by_name[("StatefulSet", "psdb-etcd")]
    (member,) = pod_spec(etcd)["containers"]
    name = etcd["metadata"]["name"]
    peers = etcd["spec"]["serviceName"]
    pods = [f"{name}-{i}" for i in range(etcd["spec"]["replicas"])]
    initial = flag_value(member, "initial-cluster")
    want = ",".join(f"{p}=http://{p}.{peers}:2380" for p in pods)
    if initial != want:
        fail(f"{path}: --initial-cluster={initial}; the StatefulSet's pods "
             f"make it {want}")
    path, sched = by_name[("Deployment", "psdb-scheduler")]
    (c,) = pod_spec(sched)["containers"]
    endpoints = flag_value(c, "etcd")
    clients = {f"{p}.{peers}:2379" for p in pods}
    services = {f"{d['metadata']['name']}:2379" for _, d in docs
                if d["kind"] == "Service" and
                d["spec"].get("selector") == {"app": name}}
    if endpoints is None or not set(endpoints.split(",")) <= clients | services:
        fail(f"{path}: --etcd={endpoints} names neither etcd's members "
             f"{sorted(clients)} nor its Services {sorted(services)}")
    print(f"ok deploy/: {cluster['PS_SERVER_NUM']} servers, "
          f"{cluster['PS_WORKER_NUM']} workers, {len(pods)} etcd members as "
          f"configured; schedulers use etcd at {endpoints}")


def main():
    root = sys.argv[1]
    bin_dir = sys.argv[2]
    deploy = os.path.join(root, "deploy")
    for path in sorted(glob.glob(os.path.join(deploy, "**", "*.y*ml"),
                                 recursive=True)):
        list(yaml.safe_load_all(open(path)))
        print(f"ok {path}: YAML")
    for path in sorted(glob.glob(os.path.join(deploy, "**", "*.json"),
                                 recursive=True)):
        json.load(open(path))
        print(f"ok {path}: JSON")

    docs = manifests(deploy)
    check_kinds(docs)
    check_commands(docs)
    check_etcd_flags(docs)
    check_sizes(docs)
    check_dry_runs(docs, bin_dir)

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
