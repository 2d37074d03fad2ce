#!/usr/bin/env python3
"""bench/partitions/summarize.py LOG...: one markdown row per partition_bench run in compare.sh / scaling.sh logs.

Columns: mode, servers x partitions, batch, writers, keys/s, CPU-us per key of the proxy cluster, of all partition
servers together, of the partition servers per key they own (min-max over servers), of the client (proxy mode)
or client+router (direct mode), all groups together, keys per partition transaction (direct), round trips.
CPU-us per key = CPU-seconds per million keys.
"""
import re
import sys


def runs(path):
    run = None
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("mode="):
            run = dict(re.findall(r"(\w+)=(\S+)", line))
            run["servers_own"] = []
            run["log"] = path.rsplit("/", 1)[-1]
        elif run is None:
            continue
        elif line.startswith("keys_per_s="):
            run.update(re.findall(r"(\w+)=(\S+)", line))
        elif line.startswith("cpu group="):
            kv = dict(re.findall(r"(\w+)=(\S+)", line))
            g = kv["group"]
            if g.startswith("proxy"):
                run["proxy"] = kv["cpu_us_per_key"]
            elif g.startswith("server"):
                run["servers_own"].append(float(kv["cpu_us_per_own_key"]))
            elif g == "partitions_total":
                run["pg"] = kv["cpu_us_per_key"]
            elif g in ("client", "client+router"):
                run["client"] = kv["cpu_us_per_key"]
            elif g == "all":
                run["all"] = kv["cpu_us_per_key"]
        elif line.startswith("partition_transactions="):
            kv = dict(re.findall(r"([\w<]+)=(\S+)", line))
            run["kpt"] = kv["keys_per_transaction"]
            run["rt"] = f"{kv['per_client_batch']} txns, <= {kv['round_trips_per_client_batch<']} RT"
        elif line.startswith("client_round_trips_per_batch="):
            kv = dict(re.findall(r"(\w+)=(\S+)", line))
            run["kpt"] = f"{float(run['batch']) / float(kv['remote_calls_per_batch']):.1f}"
            run["rt"] = f"1 RT + {kv['remote_calls_per_batch']} remote calls"
        elif line.startswith("verdicts:"):
            run["verdict"] = line.rsplit(" ", 1)[-1]
            yield run
            run = None


print("| log | mode | servers x partitions | B | writers/partition | keys/s | CPU-µs/key proxy | partition servers "
      "(per own key, min–max) | client(+router) | all | keys/partition txn | per client batch | verdicts |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for path in sys.argv[1:]:
    for r in runs(path):
        own = r["servers_own"]
        own_s = f"{min(own):.1f}–{max(own):.1f}" if len(own) > 1 else (f"{own[0]:.1f}" if own else "-")
        print(f"| {r['log']} | {r['mode']} | {r['servers']} x {r['partitions']} | {r['batch']} | "
              f"{r['writers'] if r['mode'] == 'direct' else '-'} | {r['keys_per_s']} | {r.get('proxy', '-')} | "
              f"{r.get('pg', '-')} ({own_s}) | {r.get('client', '-')} | {r.get('all', '-')} | {r.get('kpt', '-')} | "
              f"{r.get('rt', '-')} | {r.get('verdict', '-')} |")
