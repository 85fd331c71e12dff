#!/usr/bin/env bash
# The host facts that decide staging speed: CPUs and NUMA nodes, the GPU's NUMA node, transparent
# huge pages, the cgroup's CPU limit, the CPU's vector extensions.  Prints only.
echo "== cpus: nproc $(nproc), online $(cat /sys/devices/system/cpu/online 2>/dev/null)"
lscpu 2>/dev/null | grep -E 'Model name|Socket|Core|Thread|NUMA|L3|Flags' | sed 's/\(Flags:\).*\(avx[^ ]*\).*/\1 ... has \2 .../' | cut -c1-160
echo "== numa nodes"
for n in /sys/devices/system/node/node*; do [ -d "$n" ] && echo "$(basename $n): cpus $(cat $n/cpulist)"; done
echo "== gpus and their numa node"
for b in $(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader 2>/dev/null); do
  id=$(echo "$b" | tr 'A-Z' 'a-z' | sed 's/^0000\(....\)/\1/; s/^\(....:\)/0000\1/')
  f=$(ls -d /sys/bus/pci/devices/*"${id#*:}" 2>/dev/null | head -n 1)
  echo "$b: numa_node $(cat $f/numa_node 2>/dev/null), local_cpulist $(cat $f/local_cpulist 2>/dev/null)"
done
nvidia-smi topo -m 2>/dev/null | head -n 8
echo "== transparent huge pages"
for f in enabled defrag; do echo "$f: $(cat /sys/kernel/mm/transparent_hugepage/$f 2>/dev/null)"; done
echo "== cgroup"
cat /proc/self/cgroup
rel=$(sed -n 's/^0:://p' /proc/self/cgroup)
cat /sys/fs/cgroup${rel%/}/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null
echo "== affinity: $(taskset -pc $$ 2>/dev/null)"
echo "== kernel $(uname -r); glibc $(ldd --version | head -n 1)"
free -g | head -n 2
