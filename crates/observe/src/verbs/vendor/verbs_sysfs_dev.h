/*
 * Vendored from rdma-core v44.0 (https://github.com/linux-rdma/rdma-core, tag v44.0), the version
 * Debian 12 ships (44.0-2) and build.rs links statically: `struct list_node` of ccan/list.h and
 * `struct verbs_sysfs_dev` of libibverbs/driver.h (lines 243-266), unchanged but for this comment.
 * libibverbs/driver.h is not installed by libibverbs-dev; nccl-wrap fills this struct in its own
 * device discovery (src/verbs/ffi.rs, `VerbsSysfsDev`), and its layout test compiles this file.
 *
 * rdma-core is available under a choice of the GNU General Public License (GPL) Version 2 or the
 * OpenIB.org BSD license (MIT variant); see COPYING.BSD_MIT in rdma-core.
 */
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <infiniband/verbs.h>

struct list_node
{
	struct list_node *next, *prev;
};

enum {
	VSYSFS_READ_MODALIAS = 1 << 0,
	VSYSFS_READ_NODE_GUID = 1 << 1,
};

/* An rdma device detected in sysfs */
struct verbs_sysfs_dev {
	struct list_node entry;
	void *provider_data;
	const struct verbs_match_ent *match;
	unsigned int flags;
	char sysfs_name[IBV_SYSFS_NAME_MAX];
	dev_t sysfs_cdev;
	char ibdev_name[IBV_SYSFS_NAME_MAX];
	char ibdev_path[IBV_SYSFS_PATH_MAX];
	char modalias[512];
	uint64_t node_guid;
	uint32_t driver_id;
	enum ibv_node_type node_type;
	int ibdev_idx;
	uint32_t num_ports;
	uint32_t abi_ver;
	struct timespec time_created;
};
