#!/usr/bin/env bash
# Seed inputs for the staged fuzz targets (dra_metadata, sriov_dra) in staging/fuzz/corpus/<target>/,
# from the fixture nodes plus hand-written tricky ones. Deterministic; rewrites only seed-* and hand-*.
# When the targets move to fuzz/, this joins fuzz/seed.sh.
#
#   bash staging/fuzz/seed.sh
set -euo pipefail
cd "$(dirname "$0")"
fx=../../fixtures/nodes
export LC_ALL=C
for t in dra_metadata sriov_dra; do mkdir -p "corpus/$t"; rm -f "corpus/$t"/seed-* "corpus/$t"/hand-*; done

# dra_metadata: every metadata file of the fixtures.
find "$fx" -path '*/var/run/kubernetes.io/dra-device-attributes/*-metadata.json' | sort | while read -r f; do
  node=${f#"$fx"/}; node=${node%%/*}
  rel=${f#*dra-device-attributes/}
  cp "$f" "corpus/dra_metadata/seed-$node-$(echo "${rel%/*}" | tr / -)"
done
# sriov_dra: every env file that sets SRIOVNETWORK_ variables.
for f in "$fx"/*/env "$fx"/*/env.*; do
  [ -f "$f" ] && grep -q '^SRIOVNETWORK_' "$f" || continue
  cp "$f" "corpus/sriov_dra/seed-$(basename "$(dirname "$f")")-$(basename "$f")"
done

h() { printf '%b' "$2" > "corpus/$1/hand-$3"; }
m='"kind":"DeviceMetadata","apiVersion":"metadata.resource.k8s.io'
h dra_metadata "{$m/v1beta1\",\"requests\":[{\"name\":\"nics\",\"devices\":[{\"driver\":\"dra.net\",\"pool\":\"p\",\"name\":\"pci-0101-00-00-0\",\"attributes\":{\"dra.net/rdmaDevice\":{\"string\":\"mlx5_0\"},\"resource.kubernetes.io/numaNode\":{\"ints\":[0,1]}}}]}]}\n" dranet-by-name
h dra_metadata "{$m/v2\",\"x\":1}\n{$m/v1alpha1\",\"requests\":[{\"name\":\"r\",\"devices\":[{\"driver\":\"sriovnetwork.k8snetworkplumbingwg.io\",\"pool\":\"p\",\"name\":\"0000-08-00-2\",\"attributes\":{\"resource.kubernetes.io/pciBusID\":{\"string\":\"0000:08:00.2\"},\"resource.kubernetes.io/pciBusID\":{\"string\":\"../x\"}},\"networkData\":{\"interfaceName\":\"net1;x\",\"ips\":[\"10.0.0.1\",\"fd00::1/129\"],\"hardwareAddress\":\"zz\"}}]}]}\n" hostile
h dra_metadata "{$m/v1beta1\",\"apiVersion\":\"x\"}" dup-header
h dra_metadata '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]' deep
h dra_metadata "{$m/v1beta1\",\"requests\":[{\"name\":\"r\",\"devices\":[{\"driver\":\"d\",\"name\":\"\\\\u0000\\\\\"\",\"attributes\":{\"a/b\":{\"int\":1,\"bool\":true}}}]}]} trailing" escapes
h dra_metadata '\xff\xfe{}' not-utf8
h sriov_dra 'SRIOVNETWORK_0000_3b_02_6_RDMA_UVERB=/dev/infiniband/uverbs4\nSRIOVNETWORK_VF_DEVICE_0000_08_00_2=0000:08:00.3\nSRIOVNETWORK_PCI_ADDRESSES=0000:08:00.2,,x\n' key-only
h sriov_dra 'SRIOVNETWORK_VF_DEVICE_0000_08_00_2=0000:08:00.2\nSRIOVNETWORK_0000_08_00_2_RDMA_DEVICE=mlx5_1,mlx5_2\nSRIOVNETWORK_0000_08_00_2_RDMA_UVERB=/dev/infiniband/../../etc/shadow\nSRIOVNETWORK_0000_08_00_2_RDMA_CM=/dev/infiniband/rdma_cm2\nSRIOVNETWORK_a/b_RDMA_UMAD=/dev/infiniband/umad1\nSRIOVNETWORK_NET_ATTACH_DEF_NAME=\x1b[2J\n' hostile
h sriov_dra 'SRIOVNETWORK_VF_DE\x00\x1b[2J_0000_08_00_3=0000:08:00.3\n' control-name
h sriov_dra 'SRIOVNETWORK_VF_DEVICE_0000_08_00_4=0000:08:00.4\nSRIOVNETWORK_0000_08_00_4_VFIO_DEVICE=/dev/vfio/42\nSRIOVNETWORK_0000_08_00_4_NEW=1\nSRIOVNETWORK_VF_DEVICE_A=\xff\n' vfio-unknown
