/* Unit tests for the target configuration loader (src/target/config.c).
 *
 * Most cases are a table: a JSON text (written with ' for " to keep it readable) and either
 * NULL (must load) or a substring the error message must contain, usually "path: reason" or
 * "LINE:COL: path: reason". Then the values of a loaded config, the lookups, cfg_default(),
 * and every file in etc/.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "target/config.h"
#include "transport/fault/fault.h"
#include "util/log.h"

#ifndef IX_SOURCE_DIR
#error "IX_SOURCE_DIR must name the source tree (set by meson)"
#endif

struct tcase {
	const char *json;
	const char *expect; /* NULL: loads; else a substring of the error message */
};

#define T(body)	      "{'targets':[{'name':'iqn.2026-11.io.ix:t'," body "}]}"
#define LUNS(body)    T("'luns':[" body "]")
#define RAM0	      "{'lun':0,'backend':'ram','size':'1M'}"
#define G(body)	      "{'global':{" body "}}"
#define NEG(body)     G("'negotiation':{" body "}")
#define DISC(body)    G("'discovery':{" body "}")
#define P(addr, port) "{'name':'" addr port "','address':'" addr "','port':" port "}"

static const struct tcase cases[] = {
    /* whole-document and syntax */
    {"{}", NULL},
    {"{'version':1}", NULL},
    {"{'version':2}", "<t>:1:12: version: 2 is out of range (1 to 1)"},
    {"", "<t>:1:1: '[' or '{' expected"},
    {"{'global':", "<t>:1:"},
    {"{'global':{}} x", "end of file expected"},
    {"[]", "<t>:1:1: the configuration must be a JSON object, not an array"},
    {"{'global':{},'global':{}}", "duplicate object key"},
    /* unknown keys, at any depth */
    {"{'globals':{}}", "<t>:1:2: globals: unknown key \"globals\" (did you mean \"global\"?)"},
    {"{'global':{'zzzzzzzzzz':1}}",
     "global.zzzzzzzzzz: unknown key \"zzzzzzzzzz\" (allowed here: threads, log_level"},
    {NEG("'max_burst':4096"), "global.negotiation.max_burst: unknown key"},
    {DISC("'chap':{'user':'u','secret':'s','scret':'x'}"),
     "global.discovery.chap.scret: unknown key \"scret\" (did you mean \"secret\"?)"},
    {"{'portals':[{'address':'::1','prot':3260}]}", "portals[0].prot: unknown key"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','blocksize':512}"),
     "targets[0].luns[0].blocksize: unknown key \"blocksize\" (did you mean \"block_size\"?)"},
    {T("'acls':[{'initiator':'iqn.2026-11.io.ix:i','CHAP':{}}]"),
     "targets[0].acls[0].CHAP: unknown key \"CHAP\" (did you mean \"chap\"?)"},
    {T("'lun':[]"), "targets[0].lun: unknown key \"lun\" (did you mean \"luns\"?)"},
    /* wrong types */
    {G("'threads':'4'"), "global.threads: must be an integer, not a string"},
    {G("'threads':4.0"), "global.threads: must be an integer, not a number with a fraction"},
    {"{'global':[]}", "global: must be an object, not an array"},
    {"{'targets':{}}", "targets: must be an array, not an object"},
    {"{'targets':[1]}", "targets[0]: must be an object, not an integer"},
    {NEG("'immediate_data':1"), "negotiation.immediate_data: must be true or false"},
    {G("'log_level':3"), "global.log_level: must be a string, not an integer"},
    {T("'portals':'default'"), "targets[0].portals: must be an array, not a string"},
    {T("'portals':[1]"), "targets[0].portals[0]: must be a portal name, not an integer"},
    {LUNS("{'lun':0,'backend':'ram','size':true}"),
     "luns[0].size: must be an integer or a string like \"10G\", not a boolean"},
    {T("'chap':'secret'"), "targets[0].chap: must be an object, not a string"},
    {G("'mgmt_socket':null"), NULL}, /* null means absent */
    /* missing required fields */
    {"{'targets':[{}]}", "<t>:1:13: targets[0].name: required but missing"},
    {"{'targets':[{'name':null}]}", "targets[0].name: required but missing"},
    {LUNS("{'backend':'ram','size':'1M'}"), "luns[0].lun: required but missing"},
    {LUNS("{'lun':0,'size':'1M'}"), "luns[0].backend: required but missing"},
    {"{'portals':[{'port':3260}]}", "portals[0].address: required but missing"},
    {T("'acls':[{}]"), "acls[0].initiator: required but missing"},
    /* iSCSI names */
    {"{'targets':[{'name':'eui.02004567a425678d'}]}", NULL},
    {"{'targets':[{'name':'naa.52004567ba64678d'}]}", NULL},
    {"{'targets':[{'name':'naa.52004567ba64678d52004567ba64678d'}]}", NULL},
    {"{'targets':[{'name':'iqn.2026-11.io.ix'}]}", NULL},
    {"{'targets':[{'name':'iqn.2026-11.io.ix:a.b-c:d'}]}", NULL},
    {"{'targets':[{'name':'iqn.2026-11.io.IX:t'}]}",
     "targets[0].name: \"iqn.2026-11.io.IX:t\" is not a valid iSCSI name: must be lower-case"},
    {"{'targets':[{'name':'IQN.2026-11.io.ix:t'}]}", "must be lower-case"},
    {"{'targets':[{'name':'iqn.2026-11.io.ix:t_0'}]}",
     "contains a character other than a-z, 0-9, '-', '.' and ':'"},
    {"{'targets':[{'name':'iqn.2026-11.io.ix:t 0'}]}", "contains a character other"},
    {"{'targets':[{'name':'iqn.26-11.io.ix:t'}]}", "must be followed by a date yyyy-mm"},
    {"{'targets':[{'name':'iqn.2026-1.io.ix:t'}]}", "must be followed by a date yyyy-mm"},
    {"{'targets':[{'name':'iqn.2026-13.io.ix:t'}]}", "month in iqn.yyyy-mm must be 01 to 12"},
    {"{'targets':[{'name':'iqn.2026-00.io.ix:t'}]}", "month in iqn.yyyy-mm must be 01 to 12"},
    {"{'targets':[{'name':'iqn.2026-11'}]}", "must be followed by '.'"},
    {"{'targets':[{'name':'iqn.2026-11:io.ix'}]}", "must be followed by '.'"},
    {"{'targets':[{'name':'iqn.2026-11.'}]}", "reversed domain name after iqn.yyyy-mm. is missing"},
    {"{'targets':[{'name':'iqn.2026-11.:t'}]}", "is missing"},
    {"{'targets':[{'name':'iqn.2026-11.io..ix:t'}]}", "has an empty label"},
    {"{'targets':[{'name':'iqn.2026-11.io.ix.:t'}]}", "has an empty label"},
    {"{'targets':[{'name':'iqn.2026-11.io.ix:'}]}", "nothing follows the ':'"},
    {"{'targets':[{'name':'eui.02004567a425678'}]}", "\"eui.\" must be followed by 16 hex"},
    {"{'targets':[{'name':'eui.02004567a425678g'}]}", "\"eui.\" must be followed by 16 hex"},
    {"{'targets':[{'name':'naa.52004567ba64678d5'}]}", "\"naa.\" must be followed by 16 or 32"},
    {"{'targets':[{'name':'target0'}]}", "must start with \"iqn.\", \"eui.\" or \"naa.\""},
    {"{'targets':[{'name':''}]}", "targets[0].name: must not be empty"},
    {T("'acls':[{'initiator':'iqn.1994-05.com.Redhat:x'}]"),
     "targets[0].acls[0].initiator: \"iqn.1994-05.com.Redhat:x\" is not a valid iSCSI name"},
    /* duplicates */
    {"{'targets':[{'name':'iqn.2026-11.io.ix:a'},{'name':'iqn.2026-11.io.ix:a'}]}",
     "<t>:1:52: targets[1].name: target \"iqn.2026-11.io.ix:a\" is already defined by "
     "targets[0]"},
    {LUNS(RAM0 "," RAM0), "targets[0].luns[1].lun: LUN 0 is already defined by luns[0]"},
    {T("'acls':[{'initiator':'iqn.2026-11.io.ix:i'},{'initiator':'iqn.2026-11.io.ix:i'}]"),
     "acls[1].initiator: already listed in acls[0]"},
/* ACL LUN masking */
#define ACLL(body)                                                                                 \
	T("'luns':[" RAM0 "],'acls':[{'initiator':'iqn.2026-11.io.ix:i','luns':[" body "]}]")
    {ACLL(""), NULL},
    {ACLL("{'target_lun':0}"), NULL},
    {ACLL("{'lun':7,'target_lun':0}"), NULL},
    {ACLL("{'lun':7}"), "targets[0].acls[0].luns[0].target_lun: required"},
    {ACLL("{'lun':0,'target_lun':1}"), "acls[0].luns[0].target_lun: the target has no LUN 1"},
    {ACLL("{'lun':256,'target_lun':0}"), "acls[0].luns[0].lun: 256 is out of range (0 to 255)"},
    {ACLL("{'lun':1,'target_lun':0},{'lun':1,'target_lun':0}"),
     "acls[0].luns[1].lun: LUN 1 is already mapped by luns[0]"},
    {ACLL("{'lun':1,'target_lun':0},{'lun':2,'target_lun':0}"),
     "acls[0].luns[1].target_lun: LUN 0 is already shown by luns[0]"},
    {ACLL("{'lun':1,'target':0}"), "acls[0].luns[0].target: unknown key"},
    {T("'luns':[" RAM0 "],'acls':[{'initiator':'iqn.2026-11.io.ix:i','luns':{}}]"),
     "acls[0].luns: "},
#undef ACLL
    /* LUNs */
    {LUNS("{'lun':255,'backend':'ram','size':4096}"), NULL},
    {LUNS("{'lun':256,'backend':'ram','size':4096}"),
     "luns[0].lun: 256 is out of range (0 to 255)"},
    {LUNS("{'lun':-1,'backend':'ram','size':4096}"), "luns[0].lun: -1 is out of range"},
    {LUNS("{'lun':0,'backend':'nvme','size':4096}"),
     "luns[0].backend: unknown backend \"nvme\" (use ram, file, block, error or rbd)"},
    /* rbd LUNs: the configuration only (the backend needs a cluster: tests/interop/rbd.py) */
    {LUNS("{'lun':0,'backend':'rbd'}"), "targets[0].luns[0].rbd: required for an rbd LUN"},
    {LUNS("{'lun':0,'backend':'ram','size':4096,'rbd':{'pool':'p','image':'i'}}"),
     "targets[0].luns[0].rbd: only for backend \"rbd\""},
    {LUNS("{'lun':0,'backend':'rbd','rbd':{'image':'i'}}"),
     "targets[0].luns[0].rbd.pool: required but missing"},
    {LUNS("{'lun':0,'backend':'rbd','rbd':{'pool':'p'}}"),
     "targets[0].luns[0].rbd.image: required but missing"},
    {LUNS("{'lun':0,'backend':'rbd','rbd':{'pool':'p/q','image':'i'}}"),
     "targets[0].luns[0].rbd.pool: must be non-empty, without '/' or '@'"},
    {LUNS("{'lun':0,'backend':'rbd','rbd':{'pool':'p','image':'i@snap'}}"),
     "targets[0].luns[0].rbd.image: must be non-empty, without '/' or '@'"},
    {LUNS("{'lun':0,'backend':'rbd','rbd':{'pool':'p','image':'i','client':'client.a'}}"),
     "targets[0].luns[0].rbd.client: the id without \"client.\""},
    {LUNS("{'lun':0,'backend':'rbd','rbd':{'pool':'p','image':'i','conf':'ceph.conf'}}"),
     "targets[0].luns[0].rbd.conf: must be an absolute path"},
    {LUNS("{'lun':0,'backend':'rbd','rbd':{'pool':'p','image':'i','osd_op_timeout_s':0}}"),
     "targets[0].luns[0].rbd.osd_op_timeout_s: 0 is out of range"},
    {LUNS("{'lun':0,'backend':'rbd','rbd':{'pool':'p','image':'i','rejoin_after_ms':3600001}}"),
     "targets[0].luns[0].rbd.rejoin_after_ms: 3600001 is out of range"},
    {LUNS("{'lun':0,'backend':'rbd','rbd':{'pool':'p','image':'i','rejoin_after_ms':-1}}"),
     "targets[0].luns[0].rbd.rejoin_after_ms: -1 is out of range"},
    {LUNS("{'lun':0,'backend':'rbd','rbd':{'pool':'p','image':'i','lock_check_ms':99}}"),
     "targets[0].luns[0].rbd.lock_check_ms: 99 is out of range"},
    {LUNS("{'lun':0,'backend':'rbd','rbd':{'pool':'p','image':'i','handover_timeout_ms':60001}}"),
     "targets[0].luns[0].rbd.handover_timeout_ms: 60001 is out of range"},
    {LUNS("{'lun':0,'backend':'rbd','rbd':{'pool':'p','image':'i','size':1}}"),
     "targets[0].luns[0].rbd.size: unknown key \"size\""},
    {LUNS("{'lun':0,'backend':'rbd','path':'/x','rbd':{'pool':'p','image':'i'}}"),
     "targets[0].luns[0].path: an rbd LUN has no path"},
    /* the shared persistent reservation store */
    {LUNS("{'lun':0,'backend':'ram','size':4096,'pr_store':'rados'}"),
     "targets[0].luns[0].pr_store: \"rados\" is for LUNs with backend \"rbd\""},
    {LUNS("{'lun':0,'backend':'rbd','pr_store':'etcd','rbd':{'pool':'p','image':'i'}}"),
     "targets[0].luns[0].pr_store: unknown pr_store \"etcd\" (use file or rados)"},
    {LUNS("{'lun':0,'backend':'rbd','pr_store':'rados','no_medium':true,"
	  "'rbd':{'pool':'p','image':'i'}}"),
     "targets[0].luns[0].pr_store: \"rados\" needs the image: not with no_medium"},
    /* the shared store's timeouts (rbd.pr) */
    {LUNS("{'lun':0,'backend':'rbd','rbd':{'pool':'p','image':'i','pr':{'retries':4}}}"),
     "targets[0].luns[0].rbd.pr: only with \"pr_store\": \"rados\""},
    {LUNS("{'lun':0,'backend':'rbd','pr_store':'file','rbd':{'pool':'p','image':'i','pr':{}}}"),
     "targets[0].luns[0].rbd.pr: only with \"pr_store\": \"rados\""},
    {LUNS("{'lun':0,'backend':'rbd','pr_store':'rados','rbd':{'pool':'p','image':'i','pr':5}}"),
     "targets[0].luns[0].rbd.pr: must be an object, not an integer"},
    {LUNS("{'lun':0,'backend':'rbd','pr_store':'rados','rbd':{'pool':'p','image':'i',"
	  "'pr':{'notify_timeout_s':0}}}"),
     "targets[0].luns[0].rbd.pr.notify_timeout_s: 0 is out of range (1 to 60)"},
    {LUNS("{'lun':0,'backend':'rbd','pr_store':'rados','rbd':{'pool':'p','image':'i',"
	  "'pr':{'notify_timeout_s':61}}}"),
     "targets[0].luns[0].rbd.pr.notify_timeout_s: 61 is out of range"},
    {LUNS("{'lun':0,'backend':'rbd','pr_store':'rados','rbd':{'pool':'p','image':'i',"
	  "'pr':{'notify_timeout_s':2.5}}}"),
     "targets[0].luns[0].rbd.pr.notify_timeout_s: must be"},
    {LUNS("{'lun':0,'backend':'rbd','pr_store':'rados','rbd':{'pool':'p','image':'i',"
	  "'pr':{'reset_wait_s':0}}}"),
     "targets[0].luns[0].rbd.pr.reset_wait_s: 0 is out of range (1 to 10)"},
    {LUNS("{'lun':0,'backend':'rbd','pr_store':'rados','rbd':{'pool':'p','image':'i',"
	  "'pr':{'reset_wait_s':11}}}"),
     "targets[0].luns[0].rbd.pr.reset_wait_s: 11 is out of range"},
    {LUNS("{'lun':0,'backend':'rbd','pr_store':'rados','rbd':{'pool':'p','image':'i',"
	  "'pr':{'retries':0}}}"),
     "targets[0].luns[0].rbd.pr.retries: 0 is out of range (1 to 1000)"},
    {LUNS("{'lun':0,'backend':'rbd','pr_store':'rados','rbd':{'pool':'p','image':'i',"
	  "'pr':{'retries':'16'}}}"),
     "targets[0].luns[0].rbd.pr.retries: must be"},
    {LUNS("{'lun':0,'backend':'rbd','pr_store':'rados','rbd':{'pool':'p','image':'i',"
	  "'pr':{'blocklist_s':59}}}"),
     "targets[0].luns[0].rbd.pr.blocklist_s: 59 is out of range (60 to 604800)"},
    {LUNS("{'lun':0,'backend':'rbd','pr_store':'rados','rbd':{'pool':'p','image':'i',"
	  "'pr':{'notify_timeout_ms':5000}}}"),
     "targets[0].luns[0].rbd.pr.notify_timeout_ms: unknown key \"notify_timeout_ms\""},
    {LUNS("{'lun':0,'backend':'rbd','pr_store':'rados','rbd':{'pool':'p','image':'i',"
	  "'pr':{'notify_timeout_s':1,'reset_wait_s':10,'retries':1000,"
	  "'blocklist_s':604800}}}"),
     NULL},
    {LUNS("{'lun':0,'backend':'rbd','pr_store':'rados','rbd':{'pool':'p','image':'i','pr':{}}}"),
     NULL},
    {LUNS("{'lun':0,'backend':'rbd','rbd':{'pool':'p','image':'i'}},"
	  "{'lun':1,'backend':'rbd','rbd':{'pool':'p','image':'i'}}"),
     "targets[0].luns[1].rbd: image p/i is also used by targets[0].luns[0]"},
    {LUNS("{'lun':0,'backend':'rbd','readonly':true,'rbd':{'pool':'p','image':'i'}},"
	  "{'lun':1,'backend':'rbd','readonly':true,'rbd':{'pool':'p','image':'i',"
	  "'namespace':'n','conf':'/etc/ceph/ceph.conf','client':'iscsi',"
	  "'keyring':'/k','osd_op_timeout_s':5,'connect_timeout_s':3}}"),
     NULL},
    {LUNS("{'lun':0,'backend':'RAM','size':4096}"), "unknown backend \"RAM\""},
    {LUNS("{'lun':0,'backend':'ram','size':8192,'block_size':4096}"), NULL},
    {LUNS("{'lun':0,'backend':'ram','size':4096,'block_size':1024}"),
     "luns[0].block_size: 1024 is not supported: use 512 or 4096"},
    {LUNS("{'lun':0,'backend':'ram','size':4096,'block_size':0}"), "0 is not supported"},
    {LUNS("{'lun':0,'backend':'ram','size':4096,'physical_block_size':512}"), NULL},
    {LUNS("{'lun':0,'backend':'ram','size':4096,'thin':true,'thin_threshold':1}"), NULL},
    {LUNS("{'lun':0,'backend':'ram','size':4096,'thin_threshold':80}"),
     "targets[0].luns[0].thin_threshold: only for a thin LUN (\"thin\": true)"},
    {LUNS("{'lun':0,'backend':'ram','size':4096,'thin':true,'thin_threshold':0}"),
     "luns[0].thin_threshold: 0 is out of range (1 to 99)"},
    {LUNS("{'lun':0,'backend':'ram','size':4096,'thin':true,'thin_threshold':100}"),
     "100 is out of range (1 to 99)"},
    {LUNS("{'lun':0,'backend':'ram','size':4096,'thin':true,'thin_threshold':'80%'}"),
     "luns[0].thin_threshold: must be"},
    {LUNS("{'lun':0,'backend':'ram','size':4096,'physical_block_size':16384}"), NULL},
    {LUNS("{'lun':0,'backend':'ram','size':8192,'block_size':4096,'physical_block_size':512}"),
     "luns[0].physical_block_size: 512 is not a power-of-two multiple of block_size (4096)"},
    {LUNS("{'lun':0,'backend':'ram','size':4096,'physical_block_size':1536}"),
     "1536 is not a power-of-two multiple"},
    {LUNS("{'lun':0,'backend':'ram','size':4096,'physical_block_size':33554432}"),
     "at most 16777216"},
    {LUNS("{'lun':0,'backend':'ram'}"), "luns[0].size: required for a RAM LUN"},
    {LUNS("{'lun':0,'backend':'ram','size':null}"), "luns[0].size: required for a RAM LUN"},
    {LUNS("{'lun':0,'backend':'ram','size':0}"), "luns[0].size: a RAM LUN needs a size above 0"},
    {LUNS("{'lun':0,'backend':'ram','size':'0G'}"), "a RAM LUN needs a size above 0"},
    {LUNS("{'lun':0,'backend':'ram','size':1000}"),
     "luns[0].size: 1000 bytes is not a multiple of block_size (512)"},
    {LUNS("{'lun':0,'backend':'ram','size':'1K','block_size':4096}"),
     "1024 bytes is not a multiple of block_size (4096)"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','path':'/tmp/x'}"),
     "luns[0].path: a RAM LUN has no path"},
    {LUNS("{'lun':0,'backend':'file','size':'1G'}"), "luns[0].path: required for a file LUN"},
    {LUNS("{'lun':0,'backend':'block'}"), "luns[0].path: required for a block LUN"},
    {LUNS("{'lun':0,'backend':'block','path':''}"), "luns[0].path: must not be empty"},
    {LUNS("{'lun':0,'backend':'file','path':'lun0.img','size':'1G'}"),
     "luns[0].path: must be an absolute path"},
    {LUNS("{'lun':0,'backend':'file','path':'/var/lib/ix/a.img'}"), NULL},
    {LUNS("{'lun':0,'backend':'file','path':'/var/lib/ix/a.img','size':1000}"),
     "not a multiple of block_size"},
    {LUNS("{'lun':0,'backend':'block','path':'/dev/sdb','readonly':true,'size':0}"), NULL},
    {LUNS("{'lun':0,'backend':'file','path':'/a','size':'1G'},"
	  "{'lun':1,'backend':'file','path':'/a','size':'1G'}"),
     "luns[1].path: \"/a\" is also used by targets[0].luns[0]"},
    {"{'targets':[{'name':'iqn.2026-11.io.ix:a','luns':[{'lun':0,'backend':'block','path':"
     "'/dev/sdb'}]},{'name':'iqn.2026-11.io.ix:b','luns':[{'lun':0,'backend':'block','path':"
     "'/dev/sdb','readonly':true}]}]}",
     "targets[1].luns[0].path: \"/dev/sdb\" is also used by targets[0].luns[0]"},
    {"{'targets':[{'name':'iqn.2026-11.io.ix:a','luns':[{'lun':0,'backend':'block','path':"
     "'/dev/sdb','readonly':true}]},{'name':'iqn.2026-11.io.ix:b','luns':[{'lun':0,"
     "'backend':'block','path':'/dev/sdb','readonly':true}]}]}",
     NULL},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','state_dir':'state'}"),
     "luns[0].state_dir: must be an absolute path"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','state_dir':''}"),
     "luns[0].state_dir: must not be empty"},
    {"{'global':{'state_dir':'var/lib'}}", "global.state_dir: must be an absolute path"},
    {"{'global':{'state_dir':7}}", "global.state_dir: must be a string"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','removable':1}"), "luns[0].removable: must be"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','sanitize_rate':'1MB'}"), "sanitize_rate"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','vendor':'IX','product':'p','serial':'s1',"
	  "'naa_id':'0x6001405abcdef012'}"),
     NULL},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','vendor':'ABCDEFGHI'}"),
     "luns[0].vendor: is 9 bytes long, the limit is 8"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','product':'\\u00e9'}"),
     "luns[0].product: must be printable ASCII"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','naa_id':'xyz'}"),
     "luns[0].naa_id: \"xyz\" is not a non-zero hex number"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','naa_id':'0'}"), "is not a non-zero hex"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','naa_id':'12345678901234567'}"),
     "luns[0].naa_id: \"12345678901234567\" is not a non-zero hex number of up to 16"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','naa_id':'0x123456789012345678'}"),
     "luns[0].naa_id: \"0x123456789012345678\" is not a non-zero hex number of up to 16"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','naa_id':'0x60014054fc1071d7e2f4df095c8925a6f'}"),
     "luns[0].naa_id: is 35 bytes long, the limit is 34"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','naa_id':'abc'},"
	  "{'lun':1,'backend':'ram','size':'1M','naa_id':'0xABC'}"),
     "luns[1].naa_id: is also used by targets[0].luns[0]"},
    /* sizes */
    {LUNS("{'lun':0,'backend':'ram','size':'1GiB'}"), NULL},
    {LUNS("{'lun':0,'backend':'ram','size':'4k'}"), NULL},
    {LUNS("{'lun':0,'backend':'ram','size':'1GB'}"),
     "luns[0].size: \"1GB\" is not a size (a number of bytes, optionally followed by K, M, G, "
     "T or P"},
    {LUNS("{'lun':0,'backend':'ram','size':'1.5G'}"), "\"1.5G\" is not a size"},
    {LUNS("{'lun':0,'backend':'ram','size':' 1G'}"), "\" 1G\" is not a size"},
    {LUNS("{'lun':0,'backend':'ram','size':'G'}"), "\"G\" is not a size"},
    {LUNS("{'lun':0,'backend':'ram','size':'1X'}"), "\"1X\" is not a size"},
    {LUNS("{'lun':0,'backend':'ram','size':-512}"), "luns[0].size: must not be negative"},
    {LUNS("{'lun':0,'backend':'ram','size':'16777216T'}"), "\"16777216T\" is too large"},
    {LUNS("{'lun':0,'backend':'ram','size':'99999999999999999999'}"), "is too large"},
    /* portals */
    {"{'portals':[{'address':'::1'}]}", NULL},
    {"{'portals':[{'address':'::','port':3261,'tpgt':2,'transports':['tcp','iser']}]}", NULL},
    {"{'portals':[" P("0.0.0.0", "3260") "," P("::", "3260") "]}", NULL},
    {"{'portals':[" P("127.0.0.1", "3260") "," P("127.0.0.1", "3261") "]}", NULL},
    {"{'portals':[" P("127.0.0.1", "3260") "," P("127.0.0.1", "3260") "]}",
     "name: portal name \"127.0.0.13260\" is already used by portals[0]"},
    {"{'portals':[{'name':'a','address':'127.0.0.1'},{'name':'b','address':'127.0.0.1'}]}",
     "portals[1].address: 127.0.0.1 port 3260 overlaps portals[0] (127.0.0.1 port 3260)"},
    {"{'portals':[{'name':'a','address':'::1'},{'name':'b','address':'0::0:1'}]}",
     "portals[1].address: 0::0:1 port 3260 overlaps portals[0] (::1 port 3260)"},
    {"{'portals':[{'name':'a','address':'10.0.0.1'},{'name':'b','address':'0.0.0.0'}]}",
     "portals[1].address: 0.0.0.0 port 3260 overlaps portals[0]"},
    {"{'portals':[{'address':'::1'},{'address':'127.0.0.1'}]}",
     "portals[1].name: portal name \"default\" is already used by portals[0]"},
    {"{'portals':[{'address':'127.0.0.1','port':0}]}",
     "portals[0].port: 0 is out of range (1 to 65535)"},
    {"{'portals':[{'address':'127.0.0.1','port':65536}]}", "65536 is out of range (1 to 65535)"},
    {"{'portals':[{'address':'127.0.0.1','tpgt':65536}]}", "portals[0].tpgt: 65536 is out of"},
    {"{'portals':[{'address':'localhost'}]}",
     "portals[0].address: \"localhost\" is not an IPv4 or IPv6 address"},
    {"{'portals':[{'address':'[::1]'}]}", "\"[::1]\" is not an IPv4 or IPv6 address"},
    {"{'portals':[{'address':'127.0.0.256'}]}", "is not an IPv4 or IPv6 address"},
    {"{'portals':[]}", "portals: must list at least one portal"},
    {"{'portals':[{'address':'::1','transports':[]}]}", "transports: must list"},
    {"{'portals':[{'address':'::1','transports':['tcp','tcp']}]}",
     "portals[0].transports[1]: \"tcp\" is listed twice"},
    {"{'portals':[{'address':'::1','transports':['rdma']}]}",
     "portals[0].transports[0]: unknown transport \"rdma\" (tcp or iser)"},
    {T("'portals':['default']"), NULL},
    {T("'portals':['nope']"), "targets[0].portals[0]: no portal is named \"nope\""},
    {T("'portals':[]"), "targets[0].portals: must not be empty"},
    {T("'portals':['default','default']"), "targets[0].portals[1]: \"default\" is listed twice"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','naa_id':'0x60014054fc1071d7e2f4df095c8925a6'}"), NULL},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','naa_id':'50014054fc1071d7e2f4df095c8925a6'}"),
     "a 32-digit designator is NAA 6 (its first digit is 6)"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','naa_id':'60014054fc1071d7e2f4'}"),
     "is not a non-zero hex number of up to 16 digits, or of 32"},
    /* CHAP */
    {T("'chap':{'user':'u','secret':'s'}"), NULL},
    {T("'chap':{'user':'u','secret':''}"), "targets[0].chap.secret: must not be empty"},
    {T("'chap':{'user':'u'}"),
     "targets[0].chap.secret: required when \"user\" is set (CHAP user without secret)"},
    {T("'chap':{'secret':'s'}"), "targets[0].chap.user: required but missing"},
    {T("'chap':{'user':'','secret':'s'}"), "targets[0].chap.user: must not be empty"},
    {T("'chap':{}"), "targets[0].chap: a CHAP credential needs \"user\" and \"secret\""},
    {T("'chap':{'user':'u\\n','secret':'s'}"), "chap.user: contains a control character"},
    {T("'mutual_chap':{'user':'t','secret':'m'}"),
     "targets[0].mutual_chap: mutual CHAP needs one-way CHAP as well"},
    {T("'chap':{'user':'u','secret':'same'},'mutual_chap':{'user':'t','secret':'same'}"),
     "targets[0].mutual_chap.secret: the mutual CHAP secret equals the one-way secret at "
     "targets[0].chap.secret"},
    {T("'acls':[{'initiator':'iqn.2026-11.io.ix:i','chap':{'user':'u','secret':'x'}}],"
       "'mutual_chap':{'user':'t','secret':'x'}"),
     "targets[0].mutual_chap.secret: the mutual CHAP secret equals the one-way secret at "
     "targets[0].acls[0].chap.secret"},
    {"{'global':{'discovery':{'chap':{'user':'u','secret':'x'}}},"
     "'targets':[{'name':'iqn.2026-11.io.ix:t','chap':{'user':'u','secret':'y'},"
     "'mutual_chap':{'user':'t','secret':'x'}}]}",
     "targets[0].mutual_chap.secret: the mutual CHAP secret equals the one-way secret at "
     "global.discovery.chap.secret"},
    {T("'acls':[{'initiator':'iqn.2026-11.io.ix:i','chap':{'user':'u','secret':'x'}}],"
       "'mutual_chap':{'user':'t','secret':'y'}"),
     NULL},
    {T("'acls':[{'initiator':'iqn.2026-11.io.ix:i','chap':{'user':'u','secret':'x'},"
       "'mutual_chap':{'user':'t','secret':'y'}}]"),
     NULL},
    {T("'chap':{'user':'u','secret':'x'},'acls':[{'initiator':'iqn.2026-11.io.ix:i',"
       "'mutual_chap':{'user':'t','secret':'y'}}]"),
     NULL},
    {T("'acls':[{'initiator':'iqn.2026-11.io.ix:i','mutual_chap':{'user':'t','secret':'y'}}]"),
     "targets[0].acls[0].mutual_chap: mutual CHAP needs one-way CHAP as well"},
    {T("'acls':[{'initiator':'iqn.2026-11.io.ix:i','chap':{'user':'u','secret':'x'},"
       "'mutual_chap':{'user':'t','secret':'x'}}]"),
     "targets[0].acls[0].mutual_chap.secret: the mutual CHAP secret equals the one-way "
     "secret at targets[0].acls[0].chap.secret"},
    {T("'acls':[{'initiator':'iqn.2026-11.io.ix:i','chap':{'user':'u','secret':'x'},"
       "'mutual_chap':{'user':'t'}}]"),
     "targets[0].acls[0].mutual_chap.secret: required when \"user\" is set"},
    {T("'chap_required':true"),
     "targets[0].chap_required: is true but the target has no CHAP credential"},
    {T("'chap_required':false,'chap':{'user':'u','secret':'s'}"), NULL},
    {T("'acls':[{'initiator':'iqn.2026-11.io.ix:i','chap':{'user':'u','secret':'x'}},"
       "{'initiator':'iqn.2026-11.io.ix:j'}]"),
     "targets[0].acls[1]: initiator \"iqn.2026-11.io.ix:j\" has no CHAP credential but "
     "chap_required is true"},
    {T("'acls':[{'initiator':'iqn.2026-11.io.ix:i','chap':{'user':'u','secret':'x'}},"
       "{'initiator':'iqn.2026-11.io.ix:j'}],'chap_required':false"),
     NULL},
    {T("'acls':[{'initiator':'iqn.2026-11.io.ix:i','chap':{'user':'u','secret':'x'}},"
       "{'initiator':'iqn.2026-11.io.ix:j'}],'chap':{'user':'v','secret':'y'}"),
     NULL},
    {T("'chap_algorithms':['SHA256','sha3-256']"), NULL},
    {T("'chap_algorithms':['sha512']"),
     "targets[0].chap_algorithms[0]: unknown CHAP algorithm \"sha512\""},
    {T("'chap_algorithms':['md5','MD5']"), "chap_algorithms[1]: \"MD5\" is listed twice"},
    {T("'chap_algorithms':[]"), "targets[0].chap_algorithms: must not be empty"},
    {T("'chap_algorithms':[5]"), "chap_algorithms[0]: must be a string, not an integer"},
    {DISC("'chap':{'user':'u','secret':'s'},'mutual_chap':{'user':'t','secret':'m'},"
	  "'chap_algorithms':['sha256']"),
     NULL},
    {DISC("'mutual_chap':{'user':'t','secret':'m'}"),
     "global.discovery.mutual_chap: mutual CHAP needs one-way \"chap\" as well"},
    {DISC("'chap':{'user':'u','secret':'s'},'mutual_chap':{'user':'t','secret':'s'}"),
     "global.discovery.mutual_chap.secret: the mutual CHAP secret equals the one-way secret "
     "at global.discovery.chap.secret"},
    {DISC("'chap_required':true"),
     "global.discovery.chap_required: is true but no discovery \"chap\""},
    {DISC("'chap':{'user':'u','secret':'s'},'chap_required':false"), NULL},
    /* negotiation (RFC 7143 ranges) */
    {NEG("'max_recv_data_segment_length':512,'max_burst_length':16777215,"
	 "'first_burst_length':512,'immediate_data':false,'initial_r2t':true,"
	 "'max_outstanding_r2t':65535,'header_digest':'crc32c','data_digest':'prefer-crc32c',"
	 "'max_connections':65535,'default_time2wait':3600,'default_time2retain':0"),
     NULL},
    {NEG("'max_recv_data_segment_length':511"),
     "global.negotiation.max_recv_data_segment_length: 511 is out of range (512 to 16777215)"},
    {NEG("'max_recv_data_segment_length':16777216"), "16777216 is out of range"},
    {NEG("'max_burst_length':0"), "negotiation.max_burst_length: 0 is out of range"},
    {NEG("'first_burst_length':16777216"), "negotiation.first_burst_length: 16777216 is out"},
    {NEG("'first_burst_length':65536,'max_burst_length':8192"),
     "negotiation.first_burst_length: 65536 must not exceed max_burst_length (8192)"},
    {NEG("'first_burst_length':2097152"), /* above the default max_burst_length */
     "2097152 must not exceed max_burst_length (1048576)"},
    {NEG("'max_outstanding_r2t':0"), "negotiation.max_outstanding_r2t: 0 is out of range"},
    {NEG("'max_outstanding_r2t':65536"), "65536 is out of range (1 to 65535)"},
    {NEG("'max_connections':0"), "negotiation.max_connections: 0 is out of range"},
    {NEG("'default_time2wait':3601"), "negotiation.default_time2wait: 3601 is out of range"},
    {NEG("'default_time2retain':3601"), "default_time2retain: 3601 is out of range"},
    {NEG("'header_digest':'crc'"),
     "negotiation.header_digest: unknown digest setting \"crc\" (use none, prefer-none, "
     "prefer-crc32c or crc32c)"},
    {NEG("'data_digest':'CRC32C'"), "negotiation.data_digest: unknown digest setting"},
    /* global */
    {G("'threads':256,'log_level':'debug','login_timeout_ms':1,'nop_interval_ms':0,"
       "'nop_timeout_ms':1,'logout_timeout_ms':1000,'cmdsn_depth':1,'max_sessions':0,"
       "'mgmt_socket':'/tmp/x.sock'"),
     NULL},
    {G("'threads':257"), "global.threads: 257 is out of range (0 to 256)"},
    {G("'poll_us':0"), NULL},
    {G("'poll_us':10000"), NULL},
    {G("'poll_us':10001"), "global.poll_us: 10001 is out of range (0 to 10000)"},
    {G("'poll_us':'50'"), "global.poll_us: must be"},
    {G("'idle_release_ms':0"), NULL},
    {G("'idle_release_ms':3600000"), NULL},
    {G("'idle_release_ms':3600001"),
     "global.idle_release_ms: 3600001 is out of range (0 to 3600000)"},
    {G("'idle_release_ms':-1"), "global.idle_release_ms: -1 is out of range"},
    {G("'idle_release_ms':'60s'"), "global.idle_release_ms: must be"},
    {G("'threads':-1"), "global.threads: -1 is out of range (0 to 256)"},
    {G("'log_level':'verbose'"),
     "global.log_level: unknown log level \"verbose\" (use error, warn, info or debug)"},
    {G("'log_level':''"), "global.log_level: must not be empty"},
    {G("'login_timeout_ms':0"), "global.login_timeout_ms: 0 is out of range"},
    {G("'nop_timeout_ms':0"), "global.nop_timeout_ms: 0 is out of range"},
    {G("'logout_timeout_ms':999"),
     "global.logout_timeout_ms: 999 is out of range (1000 to 3600000)"},
    {G("'nop_interval_ms':3600001"), "global.nop_interval_ms: 3600001 is out of range"},
    {G("'cmdsn_depth':0"), "global.cmdsn_depth: 0 is out of range"},
    {G("'max_sessions':65536"), "global.max_sessions: 65536 is out of range (0 to 65535)"},
    {G("'mgmt_socket':''"), "global.mgmt_socket: must not be empty"},
    /* test-only features */
    {"{'testing':{}}", NULL},
    {"{'testing':{'faults':{}}}", "testing.faults: unknown key \"faults\""},
    {"{'testing':{'transport_faults':{'drop_ppm':1000001}}}",
     "testing.transport_faults.drop_ppm: 1000001 is out of range (0 to 1000000)"},
    {"{'testing':{'transport_faults':{'opcodes':[32,64]}}}",
     "testing.transport_faults.opcodes[1]: must be an opcode number from 0 to 63"},
    {"{'testing':{'transport_faults':{'delay_ms':0}}}",
     "testing.transport_faults.delay_ms: 0 is out of range"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','errors':[]}"),
     "targets[0].luns[0].errors: only for backend \"error\""},
    {LUNS("{'lun':0,'backend':'error','size':'1M','errors':[{'op':'write','error':'enospc',"
	  "'lba':8,'blocks':8},{'op':'any','error':'none','delay_ms':5,'every':2}]}"),
     NULL},
    {LUNS("{'lun':0,'backend':'error','errors':[]}"),
     "targets[0].luns[0].size: required for a RAM LUN"},
    {LUNS("{'lun':0,'backend':'error','size':'1M','errors':[{'op':'seek'}]}"),
     "targets[0].luns[0].errors[0].op: unknown operation \"seek\" (use read, write, flush or any)"},
    {LUNS("{'lun':0,'backend':'error','size':'1M','errors':[{'error':'none'}]}"),
     "targets[0].luns[0].errors[0].error: \"none\" without delay_ms does nothing"},
    {LUNS("{'lun':0,'backend':'error','size':'1M','errors':[{'eror':'eio'}]}"),
     "targets[0].luns[0].errors[0].eror: unknown key \"eror\" (did you mean \"error\"?)"},
    /* other strings */
    {T("'alias':'Lab disk'"), NULL},
    {T("'alias':'a\\u0001'"), "targets[0].alias: contains a control character"},
    /* QoS (configuration.md, "QoS") */
    {LUNS("{'lun':0,'backend':'ram','size':'1M','qos':{}}"), NULL},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','qos':{'read_iops':2000,'write_bps':'100M',"
          "'burst_ms':50}}"),
     NULL},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','qos':7}"),
     "targets[0].luns[0].qos: must be an object"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','qos':{'read_ops':1}}"),
     "targets[0].luns[0].qos.read_ops: unknown key \"read_ops\" (did you mean \"read_iops\"?)"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','qos':{'iops':-1}}"), "qos.iops:"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','qos':{'iops':100000001}}"),
     "qos.iops: 100000001 is out of range"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','qos':{'bps':'2T'}}"),
     "qos.bps: is above the largest limit"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','qos':{'read_bps':'fast'}}"),
     "qos.read_bps: \"fast\" is not a size"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','qos':{'burst_ms':60001}}"),
     "qos.burst_ms: 60001 is out of range"},
    {LUNS("{'lun':0,'backend':'ram','size':'1M','qos':{'iops':'many'}}"), "qos.iops:"},
    {T("'acls':[{'initiator':'iqn.2026-11.io.ix:i','qos':{'write_iops':10}}]"), NULL},
    {T("'acls':[{'initiator':'iqn.2026-11.io.ix:i','qos':{'writeiops':10}}]"),
     "targets[0].acls[0].qos.writeiops: unknown key"},
    {T("'acls':[{'initiator':'iqn.2026-11.io.ix:i','qos':[]}]"),
     "targets[0].acls[0].qos: must be an object"},
};

/* Replace ' with " so the table stays readable. */
static char *dequote(const char *s)
{
	char *d = strdup(s);
	for (char *p = d; *p; p++)
		if (*p == '\'')
			*p = '"';
	return d;
}

/* Built with -Drbd=disabled, a configuration with an rbd LUN is refused with this reason
 * (after the rbd object's own checks, which still run); without it, such a configuration gets
 * its own outcome. */
#define NO_RBD "built without the rbd backend"
#ifdef IX_HAVE_RBD
static bool no_rbd(const char *json)
{
	(void)json;
	return false;
}
#else
static bool no_rbd(const char *json)
{
	return strstr(json, "\"rbd\"") != NULL;
}
#endif

static void check_case(const struct tcase *tc)
{
	char err[512] = "", *json = dequote(tc->json);
	struct ix_config *cfg = NULL;
	int rc = cfg_load_string(json, "<t>", &cfg, err, sizeof(err));

	if (no_rbd(json) && rc == -EINVAL && strstr(err, NO_RBD)) {
		CHECK(cfg == NULL);
		printf("# %s\n", err);
	} else if (!tc->expect) {
		CHECK(rc == 0 && cfg != NULL);
		if (rc)
			printf("# input: %s\n# error: %s\n", json, err);
	} else {
		CHECK(rc == -EINVAL && cfg == NULL && strstr(err, tc->expect) != NULL);
		if (rc != -EINVAL || !strstr(err, tc->expect))
			printf("# input: %s\n# want:  %s\n# got:   %s (rc %d)\n", json, tc->expect,
			       err, rc);
		else
			printf("# %s\n", err);
	}
	cfg_free(cfg);
	free(json);
}

static int load(const char *json, struct ix_config **cfg, char *err, size_t errlen)
{
	char *j = dequote(json);
	int rc = cfg_load_string(j, "<t>", cfg, err, errlen);
	free(j);
	return rc;
}

static void expect_error(const char *json, const char *want)
{
	struct tcase tc = {json, want};
	check_case(&tc);
}

/* Limits that are easier to build than to write out. */
static void test_lengths(void)
{
	char name[300], secret[300], json[1024], sock[200];

	snprintf(name, sizeof(name), "iqn.2026-11.io.ix:%0*d", 223 - 18, 0);
	snprintf(json, sizeof(json), "{'targets':[{'name':'%s'}]}", name);
	expect_error(json, NULL);
	snprintf(name, sizeof(name), "iqn.2026-11.io.ix:%0*d", 224 - 18, 0);
	snprintf(json, sizeof(json), "{'targets':[{'name':'%s'}]}", name);
	expect_error(json, "is not a valid iSCSI name: is longer than 223 bytes");

	memset(secret, 'x', 255);
	secret[255] = '\0';
	snprintf(json, sizeof(json), T("'chap':{'user':'u','secret':'%s'}"), secret);
	expect_error(json, NULL);
	strcat(secret, "x");
	snprintf(json, sizeof(json), T("'chap':{'user':'u','secret':'%s'}"), secret);
	expect_error(json, "targets[0].chap.secret: is 256 bytes long, the limit is 255");

	snprintf(sock, sizeof(sock), "/%0*d", 106, 0); /* 107 bytes: fits sun_path */
	snprintf(json, sizeof(json), G("'mgmt_socket':'%s'"), sock);
	expect_error(json, NULL);
	snprintf(sock, sizeof(sock), "/%0*d", 107, 0);
	snprintf(json, sizeof(json), G("'mgmt_socket':'%s'"), sock);
	expect_error(json, "global.mgmt_socket: is 108 bytes long, the limit is 107");
}

/* Positions of semantic errors point at the offending value (or key) in the text. */
static void test_positions(void)
{
	static const char multi[] = "{\n"
				    "  'targets': [\n"
				    "    {\n"
				    "      'name': 'iqn.2026-11.io.ix:t',\n"
				    "      'luns': [\n"
				    "        { 'lun': 0, 'backend': 'ram', 'size': '1M' },\n"
				    "        { 'lun': 1, 'backend': 'ram', 'size': 1000 }\n"
				    "      ]\n"
				    "    }\n"
				    "  ]\n"
				    "}\n";
	char buf[sizeof(multi) + 16];
	char *p;

	expect_error(multi, "<t>:7:47: targets[0].luns[1].size: 1000 bytes is not a multiple");
	/* a misspelt key is reported at the key */
	strcpy(buf, multi);
	p = strstr(buf, "'size': 1000");
	memcpy(p, "'sise'", 6);
	expect_error(buf, "<t>:7:39: targets[0].luns[1].sise: unknown key \"sise\" (did you mean "
			  "\"size\"?)");
	/* a missing member: the object that lacks it */
	strcpy(buf, multi);
	p = strstr(buf, "'lun': 1,");
	memmove(p, p + 10, strlen(p + 10) + 1);
	expect_error(buf, "<t>:7:9: targets[0].luns[1].lun: required but missing");
	/* escaped keys are matched decoded; columns count characters, not bytes */
	expect_error("{'glob\\u0061l': {'threads': 999}}", "<t>:1:29: global.threads: 999 is out");
	expect_error("{'global': {'mgmt_socket': '/tmp/\xc3\xa9', 'threads': 999}}",
		     "<t>:1:49: global.threads");
	/* the second of two duplicates */
	expect_error("{'portals': [{'name': 'a', 'address': '::1'},\n"
		     "             {'name': 'a', 'address': '::2'}]}",
		     "<t>:2:23: portals[1].name: portal name \"a\" is already used by portals[0]");
	/* a secret conflict found after parsing points at the mutual secret */
	expect_error("{'global': {'discovery': {\n"
		     "  'chap': {'user': 'u', 'secret': 'abc'},\n"
		     "  'mutual_chap': {'user': 't', 'secret': 'abc'}}}}",
		     "<t>:3:42: global.discovery.mutual_chap.secret");
}

static void test_defaults(void)
{
	struct ix_config *cfg = NULL;
	const struct cfg_global *g;
	char err[256];

	CHECK_EQ(load("{}", &cfg, err, sizeof(err)), 0);
	if (!cfg)
		return;
	g = &cfg->global;
	CHECK_EQ(g->threads, 0);
	CHECK_EQ(g->log_level, LOG_INFO);
	CHECK_EQ(g->login_timeout_ms, 15000);
	CHECK_EQ(g->nop_interval_ms, 15000);
	CHECK_EQ(g->nop_timeout_ms, 30000);
	CHECK_EQ(g->logout_timeout_ms, 5000);
	CHECK_EQ(g->cmdsn_depth, 128);
	CHECK_EQ(g->max_sessions, 1024);
	CHECK_EQ(g->idle_release_ms, 60000);
	CHECK_EQ(g->neg.max_recv_dsl, 262144);
	CHECK_EQ(g->neg.sess.max_burst_length, 1048576);
	CHECK_EQ(g->neg.sess.first_burst_length, 262144);
	CHECK(g->neg.sess.immediate_data);
	CHECK(!g->neg.sess.initial_r2t);
	CHECK_EQ(g->neg.sess.max_outstanding_r2t, 8);
	CHECK_EQ(g->neg.sess.max_connections, 1);
	CHECK_EQ(g->neg.sess.default_time2wait, 2);
	CHECK_EQ(g->neg.sess.default_time2retain, 20);
	CHECK_EQ(g->neg.header_digest, NEG_DIGEST_PREFER_NONE);
	CHECK_EQ(g->neg.data_digest, NEG_DIGEST_PREFER_NONE);
	CHECK(g->discovery_chap.secret == NULL && g->discovery_mutual_chap.secret == NULL);
	CHECK(!g->discovery_chap_required);
	CHECK_EQ(g->ndiscovery_chap_algs, 4);
	CHECK(g->mgmt_socket == NULL);
	CHECK_EQ(cfg->nportals, 1);
	CHECK_STR(cfg->portals[0].name, "default");
	CHECK_STR(cfg->portals[0].address, "127.0.0.1");
	CHECK_EQ(cfg->portals[0].port, 3260);
	CHECK_EQ(cfg->portals[0].tpgt, 1);
	CHECK(cfg->portals[0].transports == 1u << dm_find_id("tcp"));
	CHECK_EQ(cfg->ntargets, 0);
	CHECK(cfg_find_target(cfg, "iqn.2026-11.io.ix:target0") == NULL);
	cfg_free(cfg);
}

static const char full[] =
    "{'version': 1,"
    " 'global': {'threads': 4, 'log_level': 'DEBUG', 'cmdsn_depth': 64,"
    "  'negotiation': {'max_recv_data_segment_length': 65536, 'header_digest': 'crc32c',"
    "   'data_digest': 'none', 'initial_r2t': true, 'first_burst_length': 65536},"
    "  'discovery': {'chap': {'user': 'disc', 'secret': 'discsecret12'},"
    "   'chap_algorithms': ['sha256']},"
    "  'mgmt_socket': '/run/ix.sock', 'state_dir': '/var/lib/ix/state'},"
    " 'portals': [{'name': 'lo', 'address': '127.0.0.1', 'port': 3260},"
    "             {'name': 'v6', 'address': '::1', 'port': 3261, 'tpgt': 2,"
    "              'transports': ['iser', 'tcp']}],"
    " 'targets': ["
    "  {'name': 'iqn.2026-11.io.ix:a', 'alias': 'disk a', 'portals': ['v6'],"
    "   'luns': [{'lun': 3, 'backend': 'file', 'path': '/var/lib/ix/a.img', 'size': '10G',"
    "             'thin': true, 'write_cache': true, 'block_size': 4096,"
    "             'thin_threshold': 75},"
    "            {'lun': 0, 'backend': 'ram', 'size': 1048576, 'vendor': 'ACME',"
    "             'product': 'fast', 'serial': 'SN1', 'naa_id': '6001405abcdef012',"
    "             'removable': true, 'sanitize_rate': '8M', 'state_dir': '/srv/pr'}],"
    "   'acls': [{'initiator': 'iqn.1994-05.com.redhat:client',"
    "             'chap': {'user': 'client', 'secret': 'clientsecret'},"
    "             'mutual_chap': {'user': 'tgt-a', 'secret': 'aclmutualsecret'}},"
    "            {'initiator': 'iqn.1994-05.com.redhat:other'}],"
    "   'chap': {'user': 'any', 'secret': 'anysecret123'},"
    "   'mutual_chap': {'user': 'tgt', 'secret': 'targetsecret'},"
    "   'chap_algorithms': ['sha3-256', 'SHA1']},"
    "  {'name': 'iqn.2026-11.io.ix:b',"
    "   'luns': [{'lun': 0, 'backend': 'block', 'path': '/dev/sdb', 'readonly': true,"
    "             'no_medium': true}]}]}";

static void test_values(void)
{
	struct ix_config *cfg = NULL;
	const struct cfg_target *a, *b;
	const struct scsi_lu_cfg *lu;
	const struct cfg_acl *acl;
	char err[256] = "";

	CHECK_EQ(load(full, &cfg, err, sizeof(err)), 0);
	if (!cfg) {
		printf("# %s\n", err);
		return;
	}
	CHECK_EQ(cfg->global.threads, 4);
	CHECK_EQ(cfg->global.log_level, LOG_DEBUG);
	CHECK_EQ(cfg->global.cmdsn_depth, 64);
	CHECK_EQ(cfg->global.neg.max_recv_dsl, 65536);
	CHECK_EQ(cfg->global.neg.header_digest, NEG_DIGEST_CRC_ONLY);
	CHECK_EQ(cfg->global.neg.data_digest, NEG_DIGEST_NONE_ONLY);
	CHECK(cfg->global.neg.sess.initial_r2t);
	CHECK_EQ(cfg->global.neg.sess.first_burst_length, 65536);
	CHECK_STR(cfg->global.discovery_chap.user, "disc");
	CHECK_STR(cfg->global.discovery_chap.secret, "discsecret12");
	CHECK(cfg->global.discovery_chap_required);
	CHECK_EQ(cfg->global.ndiscovery_chap_algs, 1);
	CHECK_EQ(cfg->global.discovery_chap_algs[0], 7);
	CHECK_STR(cfg->global.mgmt_socket, "/run/ix.sock");
	CHECK_STR(cfg->global.state_dir, "/var/lib/ix/state");

	CHECK_EQ(cfg->nportals, 2);
	CHECK_STR(cfg->portals[1].address, "::1");
	CHECK_EQ(cfg->portals[1].port, 3261);
	CHECK_EQ(cfg->portals[1].tpgt, 2);
	CHECK(cfg->portals[1].transports == (1u << dm_find_id("tcp") | 1u << dm_find_id("iser")));
	CHECK(cfg_find_portal(cfg, "lo") == &cfg->portals[0]);
	CHECK(cfg_find_portal(cfg, "nope") == NULL);

	CHECK_EQ(cfg->ntargets, 2);
	a = cfg_find_target(cfg, "iqn.2026-11.io.ix:a");
	b = cfg_find_target(cfg, "IQN.2026-11.IO.IX:B"); /* peers may send other case */
	CHECK(a == &cfg->targets[0]);
	CHECK(b == &cfg->targets[1]);
	if (!a || !b) {
		cfg_free(cfg);
		return;
	}
	CHECK_STR(a->alias, "disk a");
	CHECK_EQ(a->nportals, 1);
	CHECK(!cfg_target_on_portal(a, &cfg->portals[0]));
	CHECK(cfg_target_on_portal(a, &cfg->portals[1]));
	CHECK(cfg_target_on_portal(b, &cfg->portals[0]));
	CHECK(cfg_target_on_portal(b, &cfg->portals[1]));

	CHECK_EQ(a->nluns, 2);
	lu = &a->luns[0].lu;
	CHECK_EQ(a->luns[0].lun, 3);
	CHECK_EQ(lu->lun, 3);
	CHECK_EQ(lu->backend, BS_TYPE_FILE);
	CHECK_STR(lu->path, "/var/lib/ix/a.img");
	CHECK_EQ(lu->size_bytes, 10ull << 30);
	CHECK_EQ(lu->block_size, 4096);
	CHECK(lu->thin && lu->write_cache && !lu->readonly && !lu->no_medium);
	CHECK_EQ(lu->thin_threshold, 75);
	CHECK(lu->target_name == a->name);
	CHECK(lu->vendor == NULL && lu->product == NULL && lu->serial == NULL && !lu->naa_id);
	CHECK(!lu->removable && lu->sanitize_rate == 0);
	CHECK_STR(lu->state_dir, "/var/lib/ix/state"); /* the global default, a copy */
	CHECK(lu->state_dir != cfg->global.state_dir);
	lu = &a->luns[1].lu;
	CHECK_EQ(lu->backend, BS_TYPE_RAM);
	CHECK(lu->path == NULL);
	CHECK_EQ(lu->size_bytes, 1048576);
	CHECK_EQ(lu->block_size, 512);
	CHECK(!lu->thin && !lu->write_cache);
	CHECK_STR(lu->vendor, "ACME");
	CHECK_STR(lu->product, "fast");
	CHECK_STR(lu->serial, "SN1");
	CHECK(lu->naa_id == 0x6001405abcdef012ull);
	CHECK(lu->removable);
	CHECK_EQ(lu->sanitize_rate, 8 << 20);
	CHECK_STR(lu->state_dir, "/srv/pr");
	lu = &b->luns[0].lu;
	CHECK_EQ(lu->backend, BS_TYPE_BLOCK);
	CHECK(lu->readonly && lu->no_medium);
	CHECK_EQ(lu->size_bytes, 0);

	CHECK_EQ(a->nacls, 2);
	acl = cfg_find_acl(a, "iqn.1994-05.com.redhat:client");
	CHECK(acl == &a->acls[0]);
	CHECK(acl && acl->chap.secret && strcmp(acl->chap.secret, "clientsecret") == 0);
	CHECK(acl && acl->mutual_chap.user && strcmp(acl->mutual_chap.user, "tgt-a") == 0);
	CHECK(acl && acl->mutual_chap.secret &&
	      strcmp(acl->mutual_chap.secret, "aclmutualsecret") == 0);
	CHECK(a->acls[1].mutual_chap.secret == NULL);
	CHECK(cfg_find_acl(a, "iqn.1994-05.com.redhat:other") == &a->acls[1]);
	CHECK(cfg_find_acl(a, "iqn.1994-05.com.redhat:stranger") == NULL);
	CHECK_STR(a->chap.user, "any");
	CHECK_STR(a->mutual_chap.secret, "targetsecret");
	CHECK(a->chap_required);
	CHECK_EQ(a->nchap_algs, 2);
	CHECK_EQ(a->chap_algs[0], 8);
	CHECK_EQ(a->chap_algs[1], 6);

	/* no ACLs: everyone, through the shared empty ACL; no CHAP: not required */
	acl = cfg_find_acl(b, "iqn.1994-05.com.redhat:anyone");
	CHECK(acl != NULL && acl->initiator == NULL && acl->chap.secret == NULL);
	CHECK(!b->chap_required);
	CHECK_EQ(b->nchap_algs, 4);
	CHECK(b->nportals == 0 && b->nacls == 0);
	cfg_free(cfg);
}

/* chap_required follows from the credentials unless set. */
static void test_chap_required(void)
{
	static const struct {
		const char *json;
		bool required;
	} cases2[] = {
	    {T("'chap':{'user':'u','secret':'s'}"), true},
	    {T("'acls':[{'initiator':'iqn.2026-11.io.ix:i','chap':{'user':'u','secret':'s'}}]"),
	     true},
	    {T("'acls':[{'initiator':'iqn.2026-11.io.ix:i'}]"), false},
	    {T("'chap':{'user':'u','secret':'s'},'chap_required':false"), false},
	};

	for (size_t i = 0; i < sizeof(cases2) / sizeof(cases2[0]); i++) {
		struct ix_config *cfg = NULL;
		char err[256];
		CHECK_EQ(load(cases2[i].json, &cfg, err, sizeof(err)), 0);
		if (cfg)
			CHECK_EQ(cfg->targets[0].chap_required, cases2[i].required);
		cfg_free(cfg);
	}
}

static void test_default_config(void)
{
	struct ix_config *cfg = NULL;

	CHECK_EQ(cfg_default(&cfg, 0), 0);
	if (cfg) {
		CHECK_EQ(cfg->nportals, 1);
		CHECK_STR(cfg->portals[0].address, "127.0.0.1");
		CHECK_EQ(cfg->portals[0].port, 3260);
		CHECK_EQ(cfg->ntargets, 1);
		CHECK_STR(cfg->targets[0].name, "iqn.2026-11.io.ix:target0");
		CHECK_EQ(cfg->targets[0].nluns, 1);
		CHECK_EQ(cfg->targets[0].luns[0].lun, 0);
		CHECK_EQ(cfg->targets[0].luns[0].lu.backend, BS_TYPE_RAM);
		CHECK_EQ(cfg->targets[0].luns[0].lu.size_bytes, 1ull << 30);
		CHECK(!cfg->targets[0].chap_required);
		CHECK(cfg_find_acl(&cfg->targets[0], "iqn.2026-11.io.ix:anyone") != NULL);
	}
	cfg_free(cfg);
	cfg = NULL;
	CHECK_EQ(cfg_default(&cfg, 64ull << 20), 0);
	if (cfg)
		CHECK_EQ(cfg->targets[0].luns[0].lu.size_bytes, 64ull << 20);
	cfg_free(cfg);
	cfg = NULL;
	CHECK_EQ(cfg_default(&cfg, 1000), -EINVAL); /* not a multiple of 512 */
	CHECK(cfg == NULL);
}

static void load_file_ok(const char *path)
{
	struct ix_config *cfg = NULL;
	char err[512] = "";
	int rc = cfg_load_file(path, &cfg, err, sizeof(err));

	printf("# %s\n", path);
	CHECK_EQ(rc, 0);
	if (rc)
		printf("# %s\n", err);
	CHECK(rc != 0 || (cfg && cfg->ntargets > 0));
	cfg_free(cfg);
}

/* The shipped default and every example must load. */
static void test_etc(void)
{
	struct ix_config *cfg = NULL;
	char path[1024];
	struct dirent *de;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/etc/ix-target.json", IX_SOURCE_DIR);
	load_file_ok(path);
	CHECK_EQ(cfg_load_file(path, &cfg, NULL, 0), 0);
	if (cfg) {
		CHECK_STR(cfg->targets[0].name, "iqn.2026-11.io.ix:target0");
		CHECK_EQ(cfg->targets[0].luns[0].lu.size_bytes, 1ull << 30);
		CHECK_STR(cfg->portals[0].address, "127.0.0.1");
		CHECK(!cfg->targets[0].chap_required);
	}
	cfg_free(cfg);

	snprintf(path, sizeof(path), "%s/etc/examples", IX_SOURCE_DIR);
	d = opendir(path);
	CHECK(d != NULL);
	while (d && (de = readdir(d))) {
		size_t len = strlen(de->d_name);
		if (len < 5 || strcmp(de->d_name + len - 5, ".json") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/etc/examples/%s", IX_SOURCE_DIR, de->d_name);
		load_file_ok(path);
		n++;
	}
	if (d)
		closedir(d);
	CHECK(n >= 2);
}

/* Every ```json block of docs/configuration.md must load. */
/* Every json block of a page in docs/ loads; returns how many there were. */
static int load_doc_blocks(const char *page)
{
	char path[1024], *text, *p;
	struct ix_config *cfg;
	FILE *f;
	long len;
	int n = 0;

	snprintf(path, sizeof(path), "%s/docs/%s", IX_SOURCE_DIR, page);
	f = fopen(path, "rb");
	CHECK(f != NULL);
	if (!f)
		return 0;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	text = calloc(1, (size_t)len + 1);
	CHECK(text && fread(text, 1, (size_t)len, f) == (size_t)len);
	fclose(f);
	for (p = text; p && (p = strstr(p, "```json\n"));) {
		char *start = p + 8, *end = strstr(start, "```"), err[512] = "";
		if (!end)
			break;
		*end = '\0';
		cfg = NULL;
		if (no_rbd(start))
			CHECK(cfg_load_string(start, page, &cfg, err, sizeof(err)) == -EINVAL &&
			      strstr(err, NO_RBD));
		else
			CHECK_EQ(cfg_load_string(start, page, &cfg, err, sizeof(err)), 0);
		if (!cfg)
			printf("# %s block %d: %s\n", page, n, err);
		cfg_free(cfg);
		n++;
		p = end + 3;
	}
	free(text);
	return n;
}

static void test_qos(void)
{
	const char *json = "{'targets':[{'name':'iqn.2026-11.io.ix:t','luns':[{'lun':3,'backend':"
			   "'ram','size':'1M','qos':{'read_iops':2000,'write_iops':10,'iops':3000,"
			   "'read_bps':'1M','write_bps':4096,'bps':'1G','burst_ms':250}},{'lun':"
			   "4,'backend':'ram','size':'1M'}],'acls':[{'initiator':'iqn.2026-11."
			   "io.ix:i','qos':{'iops':77}},{'initiator':'iqn.2026-11.io.ix:j'}]}]}";
	struct ix_config *cfg = NULL;
	char err[512] = "";

	CHECK_EQ(load(json, &cfg, err, sizeof(err)), 0);
	if (!cfg)
		return;
	const struct cfg_qos *q = &cfg->targets[0].luns[0].qos;
	CHECK_EQ(q->limit[CFG_QOS_READ_IOPS], 2000);
	CHECK_EQ(q->limit[CFG_QOS_WRITE_IOPS], 10);
	CHECK_EQ(q->limit[CFG_QOS_IOPS], 3000);
	CHECK_EQ(q->limit[CFG_QOS_READ_BPS], 1 << 20);
	CHECK_EQ(q->limit[CFG_QOS_WRITE_BPS], 4096);
	CHECK_EQ(q->limit[CFG_QOS_BPS], 1 << 30);
	CHECK_EQ(q->burst_ms, 250);
	q = &cfg->targets[0].luns[1].qos;
	for (int i = 0; i < CFG_QOS_NLIMITS; i++)
		CHECK_EQ(q->limit[i], 0);
	CHECK_EQ(q->burst_ms, 0);
	CHECK_EQ(cfg->targets[0].acls[0].qos.limit[CFG_QOS_IOPS], 77);
	CHECK_EQ(cfg->targets[0].acls[0].qos.limit[CFG_QOS_READ_IOPS], 0);
	CHECK_EQ(cfg->targets[0].acls[1].qos.limit[CFG_QOS_IOPS], 0);
	cfg_free(cfg);
}

static void test_docs(void)
{
	int n = load_doc_blocks("configuration.md"), m = load_doc_blocks("ha.md");

	CHECK(n >= 2);
	CHECK(m >= 1);
}

static void test_files(void)
{
	char path[] = "/tmp/ix-config-test-XXXXXX", want[128], err[512] = "";
	struct ix_config *cfg = NULL;
	static const char bad[] = "{\n  \"global\": {\n    \"threads\": 1000\n  }\n}\n";
	int fd = mkstemp(path);

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK_EQ(write(fd, bad, strlen(bad)), (long long)strlen(bad));
	close(fd);
	CHECK_EQ(cfg_load_file(path, &cfg, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want), "%s:3:16: global.threads: 1000 is out of range", path);
	CHECK(strstr(err, want) == err);
	printf("# %s\n", err);
	unlink(path);

	CHECK_EQ(cfg_load_file(path, &cfg, err, sizeof(err)), -ENOENT);
	snprintf(want, sizeof(want), "%s: No such file or directory", path);
	CHECK_STR(err, want);
	CHECK(cfg == NULL);
	CHECK_EQ(cfg_load_file("/tmp", &cfg, err, sizeof(err)), -EISDIR);
	CHECK(strncmp(err, "/tmp: ", 6) == 0);

	/* a tiny error buffer truncates, never overflows */
	{
		char small[8];
		memset(small, 'z', sizeof(small));
		CHECK_EQ(load("{'global':{'threads':1000}}", &cfg, small, sizeof(small)), -EINVAL);
		CHECK(memchr(small, '\0', sizeof(small)) != NULL);
	}
}

/* Test-only features mark the configuration, so ix-target can refuse it without --testing. */
static void test_testing(void)
{
	struct ix_config *cfg = NULL;
	const struct scsi_lu_cfg *lu;
	char err[512] = "";

	CHECK_EQ(load(LUNS(RAM0), &cfg, err, sizeof(err)), 0);
	CHECK(cfg && !cfg->test_features && !cfg->testing.transport_faults);
	cfg_free(cfg);
	CHECK_EQ(load(LUNS("{'lun':0,'backend':'error','size':'1M','errors':[{'op':'read',"
			   "'lba':3,'blocks':2,'every':4}]}"),
		      &cfg, err, sizeof(err)),
		 0);
	CHECK(cfg && cfg->test_features && !cfg->testing.transport_faults);
	if (cfg) {
		lu = &cfg->targets[0].luns[0].lu;
		CHECK_EQ(lu->backend, BS_TYPE_ERROR);
		CHECK_EQ(lu->n_err_rules, 1);
		CHECK(lu->err_rules && lu->err_rules[0].ops == BS_ERR_OP_READ &&
		      lu->err_rules[0].error == -EIO && lu->err_rules[0].lba == 3 &&
		      lu->err_rules[0].blocks == 2 && lu->err_rules[0].every == 4);
	}
	cfg_free(cfg);
	CHECK_EQ(load("{'testing':{'transport_faults':{'seed':9,'drop_ppm':5,'opcodes':[37,49],"
		      "'reset_after_bytes':100000}}}",
		      &cfg, err, sizeof(err)),
		 0);
	CHECK(cfg && cfg->test_features && cfg->testing.transport_faults);
	if (cfg) {
		const struct fault_cfg *f = (const struct fault_cfg *)cfg->testing.faults;
		CHECK(f->seed == 9 && f->drop_ppm == 5 && f->delay_ms == 100 &&
		      f->opcodes == ((1ull << 37) | (1ull << 49)) &&
		      f->reset_after_bytes == 100000 && !f->during_login);
	}
	cfg_free(cfg);
}


/* ALUA target port groups: portals resolve to their TPGTs, remote ports by id, and every
 * mistake names its JSON path. */
#define ALUA_PORTALS                                                                               \
	"{'portals': [{'name': 'a', 'address': '127.0.0.1', 'port': 3261, 'tpgt': 1},"            \
	"{'name': 'b', 'address': '127.0.0.1', 'port': 3262, 'tpgt': 2},"                         \
	"{'name': 'z', 'address': '127.0.0.1', 'port': 3263, 'tpgt': 0}],"
#define ALUA_T(alua)                                                                               \
	ALUA_PORTALS "'targets': [{'name': 'iqn.2024-01.org.ix:t', 'portals': ['a', 'b'],"        \
		     "'luns': [{'lun': 0, 'backend': 'ram', 'size': '1M'}], 'alua': " alua "}]}"

/* rbd.rejoin_after_ms: 5000 when absent (with start_offline true), 0 = only when asked;
 * lock_check_ms and handover_timeout_ms 1000 and 5000 when absent. */
static void test_rbd_defaults(void)
{
	static const char *const json[] = {
	    LUNS("{'lun':0,'backend':'rbd','rbd':{'pool':'p','image':'i'}}"),
	    LUNS("{'lun':0,'backend':'rbd','rbd':{'pool':'p','image':'i','rejoin_after_ms':0,"
		 "'start_offline':false,'lock_check_ms':250,'handover_timeout_ms':700}}")};
	static const uint32_t want[] = {5000, 0}, check[] = {1000, 250}, handover[] = {5000, 700};
	char err[512];

	for (size_t i = 0; i < 2; i++) {
		struct ix_config *cfg = NULL;
		const struct scsi_lu_cfg *lu;

		if (no_rbd("\"rbd\"")) {
			CHECK(load(json[i], &cfg, err, sizeof(err)) == -EINVAL && strstr(err, NO_RBD));
			continue;
		}
		CHECK_EQ(load(json[i], &cfg, err, sizeof(err)), 0);
		if (!cfg)
			continue;
		lu = &cfg->targets[0].luns[0].lu;
		CHECK_EQ(lu->bs.rbd.rejoin_after_ms, want[i]);
		CHECK_EQ(lu->bs.rbd.lock_check_ms, check[i]);
		CHECK_EQ(lu->bs.rbd.handover_timeout_ms, handover[i]);
		CHECK_EQ(lu->bs.rbd.start_offline, i == 0);
		CHECK_EQ(lu->bs.rbd.osd_op_timeout_s, 0);
		cfg_free(cfg);
	}
}

/* rbd.pr reaches the LU configuration; absent keys stay 0 (the store's defaults). */
static void test_rbd_pr(void)
{
	struct ix_config *cfg = NULL;
	char err[256] = "";
	const struct bs_rbd_pr_cfg *p;

	if (no_rbd("\"rbd\"")) {
		CHECK(load(LUNS("{'lun':0,'backend':'rbd','pr_store':'rados','rbd':{'pool':'p',"
				"'image':'i'}}"),
			   &cfg, err, sizeof(err)) == -EINVAL &&
		      strstr(err, NO_RBD));
		return;
	}
	CHECK_EQ(load(LUNS("{'lun':0,'backend':'rbd','pr_store':'rados','rbd':{'pool':'p',"
			   "'image':'i','pr':{'notify_timeout_s':15,'reset_wait_s':7,"
			   "'retries':3,'blocklist_s':120}}},"
			   "{'lun':1,'backend':'rbd','pr_store':'rados','rbd':{'pool':'p',"
			   "'image':'j'}}"),
		      &cfg, err, sizeof(err)),
		 0);
	if (!cfg) {
		printf("# %s\n", err);
		return;
	}
	p = &cfg->targets[0].luns[0].lu.bs.rbd.pr;
	CHECK_EQ(p->notify_timeout_s, 15);
	CHECK_EQ(p->reset_wait_s, 7);
	CHECK_EQ(p->retries, 3);
	CHECK_EQ(p->blocklist_s, 120);
	p = &cfg->targets[0].luns[1].lu.bs.rbd.pr;
	CHECK(p->notify_timeout_s == 0 && p->reset_wait_s == 0 && p->retries == 0 &&
	      p->blocklist_s == 0);
	cfg_free(cfg);
}

static void test_alua(void)
{
	static const struct tcase bad[] = {
	    {ALUA_T("{}"), "targets[0].alua.groups: required but missing"},
	    {ALUA_T("{'groups': []}"), "targets[0].alua.groups: must list 1 to 16"},
	    {ALUA_T("{'groups': [{'id': 1, 'state': 'active/optimized', 'portals': ['a', 'b']}], "
		    "'explicit': 1}"),
	     "targets[0].alua.explicit: must be true or false"},
	    {ALUA_T("{'groups': [{'id': 1, 'state': 'active', 'portals': ['a', 'b']}]}"),
	     "targets[0].alua.groups[0].state: unknown state"},
	    {ALUA_T("{'groups': [{'id': 0, 'state': 'standby', 'portals': ['a', 'b']}]}"),
	     "targets[0].alua.groups[0].id: 0 is out of range"},
	    {ALUA_T("{'groups': [{'state': 'standby', 'portals': ['a', 'b']}]}"),
	     "targets[0].alua.groups[0].id: required but missing"},
	    {ALUA_T("{'groups': [{'id': 1, 'state': 'standby', 'portals': ['a']}]}"),
	     "targets[0].alua.groups: portal \"b\" (tpgt 2) is in no group"},
	    {ALUA_T("{'groups': [{'id': 1, 'state': 'standby', 'portals': ['a', 'z']}]}"),
	     "targets[0].alua.groups[0].portals[1]: the target has no portal named \"z\""},
	    {ALUA_T("{'groups': [{'id': 1, 'state': 'standby', 'portals': ['a', 'q']}]}"),
	     "targets[0].alua.groups[0].portals[1]: the target has no portal named \"q\""},
	    {ALUA_T("{'groups': [{'id': 1, 'state': 'standby', 'portals': ['a']},"
		    "{'id': 1, 'state': 'standby', 'portals': ['b']}]}"),
	     "targets[0].alua.groups[1].id: group 1 is already defined by groups[0]"},
	    {ALUA_T("{'groups': [{'id': 1, 'state': 'standby', 'portals': ['a', 'b']},"
		    "{'id': 2, 'state': 'standby', 'relative_ports': [2]}]}"),
	     "targets[0].alua.groups[1].relative_ports[0]: relative target port 2 is already in "
	     "group 1"},
	    {ALUA_T("{'groups': [{'id': 1, 'state': 'standby', 'portals': ['a', 'b']},"
		    "{'id': 2, 'state': 'standby', 'relative_ports': [70000]}]}"),
	     "targets[0].alua.groups[1].relative_ports[0]: must be a relative target port id"},
	    {ALUA_T("{'groups': [{'id': 1, 'state': 'standby', 'portals': ['a', 'b']},"
		    "{'id': 2, 'state': 'standby'}]}"),
	     "targets[0].alua.groups[1]: has no target port"},
	    {ALUA_T("{'groups': [{'id': 1, 'state': 'standby', 'portals': ['a', 'b'], 'port': 1}]}"),
	     "targets[0].alua.groups[0].port: unknown key"},
	    {ALUA_T("{'groups': [{'id': 1, 'state': 'standby', 'portals': ['a', 'b']}], "
		    "'transition_time': 256}"),
	     "targets[0].alua.transition_time: 256 is out of range"},
	    {ALUA_T("{'groups': [{'id': 1, 'state': 'standby', 'portals': ['a', 'b']}], "
		    "'implicit_failover_ms': 600001}"),
	     "targets[0].alua.implicit_failover_ms: 600001 is out of range"},
	    /* a target on every portal includes z, whose tpgt 0 cannot be a target port */
	    {ALUA_PORTALS "'targets': [{'name': 'iqn.2024-01.org.ix:t', 'alua': {'groups': "
			  "[{'id': 1, 'state': 'standby', 'portals': ['a', 'b', 'z']}]}}]}",
	     "targets[0].alua.groups[0].portals[2]: portal \"z\" has tpgt 0"},
	};
	const char *good = ALUA_T(
	    "{'transition_time': 9, 'explicit': false, 'groups': ["
	    "{'id': 7, 'state': 'active/optimized', 'preferred': true, 'portals': ['a']},"
	    "{'id': 8, 'state': 'Standby', 'portals': ['b'], 'relative_ports': [5, 6]}]}");
	struct ix_config *cfg = NULL;
	const struct scsi_alua_cfg *a;
	char err[512] = "";

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		check_case(&bad[i]);
	CHECK_EQ(load(good, &cfg, err, sizeof(err)), 0);
	if (!cfg) {
		printf("# %s\n", err);
		return;
	}
	a = &cfg->targets[0].alua;
	CHECK_EQ(a->ngroups, 2);
	CHECK(!a->explicit_ok);
	CHECK_EQ(a->transition_s, 9);
	CHECK_EQ(a->groups[0].id, 7);
	CHECK_EQ(a->groups[0].state, SCSI_ALUA_ACTIVE_OPTIMIZED);
	CHECK(a->groups[0].preferred);
	CHECK_EQ(a->groups[0].nports, 1);
	CHECK_EQ(a->groups[0].ports[0], 1);
	CHECK_EQ(a->groups[1].state, SCSI_ALUA_STANDBY);
	CHECK_EQ(a->groups[1].nports, 3);
	CHECK_EQ(a->groups[1].ports[0], 2);
	CHECK_EQ(a->groups[1].ports[2], 6);
	CHECK_EQ(a->implicit_failover_ms, 5000); /* the default */
	CHECK(a->groups[0].local);
	CHECK(a->groups[1].local); /* it has a portal of this gateway */
	CHECK(scsi_alua_cfg_error(a) == NULL);
	cfg_free(cfg);
	cfg = NULL;
	CHECK_EQ(load(ALUA_T("{'implicit_failover_ms': 0, 'groups': ["
			     "{'id': 1, 'state': 'standby', 'portals': ['a', 'b']},"
			     "{'id': 2, 'state': 'standby', 'relative_ports': [9]}]}"),
		      &cfg, err, sizeof(err)),
		 0);
	if (cfg) {
		a = &cfg->targets[0].alua;
		CHECK_EQ(a->implicit_failover_ms, 0);
		CHECK(a->groups[0].local);
		CHECK(!a->groups[1].local); /* another gateway's */
		cfg_free(cfg);
		cfg = NULL;
	}
	CHECK_EQ(load(ALUA_PORTALS "'targets': [{'name': 'iqn.2024-01.org.ix:t'}]}", &cfg, err,
		      sizeof(err)),
		 0);
	if (cfg) {
		CHECK_EQ(cfg->targets[0].alua.ngroups, 0);
		cfg_free(cfg);
	}
}

/* targets[].redirect: the address's syntax (normalized to HOST:PORT[,TPGT]), its portals,
 * and a redirection that would loop back to the portal it applies to. */
#define RD_PORTALS "'portals':[{'name':'a','address':'192.0.2.1'},{'name':'b','address':'::1'}],"
#define RD_ALUA                                                                                    \
	"'alua':{'groups':[{'id':1,'state':'active/optimized','portals':['a','b']},"               \
	"{'id':2,'state':'standby','relative_ports':[2]}]}"
#define RD(body) "{" RD_PORTALS "'targets':[{'name':'iqn.2026-11.io.ix:t'," body "}]}"
static void test_redirect(void)
{
	static const struct tcase bad[] = {
	    {RD("'redirect':{'address':'192.0.2.9'}"), NULL},
	    {RD("'redirect':{'address':'gw-b.example.com:3261,2','permanent':true}"), NULL},
	    {RD("'redirect':'192.0.2.9'"), "targets[0].redirect: must be an object, not a string"},
	    {RD("'redirect':{}"), "targets[0].redirect: needs \"address\" (send logins there), "
				 "\"addresses\" (in turn) or \"owners\""},
	    {RD("'redirect':{'permanent':true}"), "targets[0].redirect: needs \"address\""},
	    {RD("'redirect':{'address':''}"), "targets[0].redirect.address: must not be empty"},
	    {RD("'redirect':{'address':'192.0.2.9:0'}"), "is not a portal address"},
	    {RD("'redirect':{'address':'192.0.2.9:65536'}"), "is not a portal address"},
	    {RD("'redirect':{'address':'192.0.2.9,70000'}"), "is not a portal address"},
	    {RD("'redirect':{'address':'[::1'}"), "is not a portal address"},
	    {RD("'redirect':{'address':'bad_host'}"), "is not a portal address"},
	    {RD("'redirect':{'address':'-x.example'}"), "is not a portal address"},
	    {RD("'redirect':{'address':'a..b'}"), "is not a portal address"},
	    {RD("'redirect':{'address':'h TargetName=x'}"), "is not a portal address"},
	    {RD("'redirect':{'address':'192.0.2.9','permanent':1}"),
	     "targets[0].redirect.permanent: must be"},
	    {RD("'redirect':{'address':'192.0.2.9','port':3260}"),
	     "targets[0].redirect.port: unknown key"},
	    {RD("'redirect':{'address':'192.0.2.9','portals':[]}"),
	     "targets[0].redirect.portals: must not be empty"},
	    {RD("'redirect':{'address':'192.0.2.9','portals':['c']}"),
	     "targets[0].redirect.portals[0]: the target has no portal named \"c\""},
	    {RD("'portals':['b'],'redirect':{'address':'192.0.2.9','portals':['a']}"),
	     "targets[0].redirect.portals[0]: the target has no portal named \"a\""},
	    {RD("'redirect':{'address':'192.0.2.9','portals':['a','a']}"), "listed twice"},
	    {RD("'redirect':{'address':'192.0.2.1'}"),
	     "targets[0].redirect.address: redirects logins arriving at portal \"a\""},
	    {RD("'redirect':{'address':'[::1]:3260,1','portals':['b']}"), "they would loop"},
	    {RD("'redirect':{'address':'192.0.2.1','portals':['b']}"), NULL},
	    {RD("'redirect':{'address':'192.0.2.1:3261'}"), NULL},
	    /* addresses: in turn */
	    {RD("'redirect':{'addresses':['192.0.2.8','gw.example:3261,2']}"), NULL},
	    {RD("'redirect':{'addresses':[]}"), "targets[0].redirect.addresses: must not be empty"},
	    {RD("'redirect':{'addresses':'192.0.2.8'}"),
	     "targets[0].redirect.addresses: must be an array"},
	    {RD("'redirect':{'addresses':[7]}"),
	     "targets[0].redirect.addresses[0]: must be a portal address (a string), not an integer"},
	    {RD("'redirect':{'addresses':['192.0.2.8','x y']}"),
	     "targets[0].redirect.addresses[1]: \"x y\" is not a portal address"},
	    {RD("'redirect':{'addresses':['192.0.2.8','192.0.2.8:3260']}"),
	     "targets[0].redirect.addresses[1]: \"192.0.2.8:3260\" is listed twice"},
	    {RD("'redirect':{'addresses':['192.0.2.8','192.0.2.1']}"),
	     "targets[0].redirect.addresses[1]: redirects logins arriving at portal \"a\""},
	    {RD("'redirect':{'address':'h','addresses':['192.0.2.8']}"),
	     "targets[0].redirect.addresses: and \"address\" exclude each other"},
	    {RD("'redirect':{'addresses':['']}"), "targets[0].redirect.addresses[0]: must be 1 to"},
	    /* owners: the HA policy (needs the target's ALUA groups) */
	    {RD("'redirect':{'owners':[{'group':2,'address':'192.0.2.2'}]}"),
	     "targets[0].redirect.owners: needs ALUA groups"},
	    {RD(RD_ALUA ",'redirect':{'owners':[{'group':2,'address':'192.0.2.2'}]}"), NULL},
	    {RD(RD_ALUA ",'redirect':{'owners':[]}"), "targets[0].redirect.owners: must not be empty"},
	    {RD(RD_ALUA ",'redirect':{'owners':[{'group':1,'address':'192.0.2.2'}]}"),
	     "targets[0].redirect.owners[0].group: group 1 is this gateway's own"},
	    {RD(RD_ALUA ",'redirect':{'owners':[{'group':3,'address':'192.0.2.2'}]}"),
	     "targets[0].redirect.owners[0].group: the target has no ALUA group 3"},
	    {RD(RD_ALUA ",'redirect':{'owners':[{'group':2}]}"),
	     "targets[0].redirect.owners[0].address: required but missing"},
	    {RD(RD_ALUA ",'redirect':{'owners':[{'address':'x'}]}"),
	     "targets[0].redirect.owners[0].group: required but missing"},
	    {RD(RD_ALUA ",'redirect':{'owners':[{'group':2,'address':'a b'}]}"),
	     "targets[0].redirect.owners[0].address: \"a b\" is not a portal address"},
	    {RD(RD_ALUA ",'redirect':{'owners':[{'group':2,'address':'h'},{'group':2,'address':'h'}]}"),
	     "targets[0].redirect.owners[1].group: group 2 is listed twice"},
	    {RD(RD_ALUA ",'redirect':{'owners':[{'group':2,'address':'h','x':1}]}"),
	     "targets[0].redirect.owners[0].x: unknown key"},
	    {RD(RD_ALUA ",'redirect':{'permanent':true,'owners':[{'group':2,'address':'h'}]}"),
	     "targets[0].redirect.permanent: is for \"address\""},
	    {RD(RD_ALUA ",'redirect':{'permanent':false,'owners':[{'group':2,'address':'h'}]}"),
	     NULL},
	    {RD(RD_ALUA ",'redirect':{'address':'h','owners':[{'group':2,'address':'h'}]}"),
	     "targets[0].redirect.owners: and \"address\" / \"addresses\" exclude each other"},
	};
	struct ix_config *cfg = NULL;
	const struct cfg_target *t;
	char err[256] = "";

	printf("# redirect\n");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		check_case(&bad[i]);
	CHECK_EQ(load(RD("'redirect':{'address':'::2'}}, {'name':'iqn.2026-11.io.ix:u',"
			 "'redirect':{'address':'gw.example,7','permanent':true,'portals':['b']}"),
		      &cfg, err, sizeof(err)),
		 0);
	if (!cfg) {
		printf("# %s\n", err);
		return;
	}
	t = &cfg->targets[0];
	CHECK_STR(t->redirect.address, "[::2]:3260");
	CHECK(!t->redirect.permanent);
	CHECK(cfg_target_redirect(t, &cfg->portals[0]) == &t->redirect);
	CHECK(cfg_target_redirect(t, &cfg->portals[1]) == &t->redirect);
	t = &cfg->targets[1];
	CHECK_STR(t->redirect.address, "gw.example:3260,7");
	CHECK(t->redirect.permanent);
	CHECK(cfg_target_redirect(t, &cfg->portals[0]) == NULL);
	CHECK(cfg_target_redirect(t, &cfg->portals[1]) == &t->redirect);
	cfg_free(cfg);
	cfg = NULL;
	CHECK_EQ(load(RD(RD_ALUA ",'redirect':{'owners':[{'group':2,'address':'[::9]:3262,2'}]}"),
		      &cfg, err, sizeof(err)),
		 0);
	if (cfg) {
		t = &cfg->targets[0];
		CHECK(t->redirect.address == NULL);
		CHECK_EQ(t->redirect.nowners, 1);
		CHECK_EQ(t->redirect.owners[0].group, 2);
		CHECK_STR(t->redirect.owners[0].address, "[::9]:3262,2");
		CHECK(cfg_target_redirect(t, &cfg->portals[0]) == &t->redirect);
	} else {
		printf("# %s\n", err);
	}
	cfg_free(cfg);
	cfg = NULL;
	CHECK_EQ(load(RD("'luns':[]"), &cfg, err, sizeof(err)), 0);
	CHECK(cfg && !cfg_target_redirect(&cfg->targets[0], &cfg->portals[0]));
	cfg_free(cfg);
}

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_case(&cases[i]);
	test_lengths();
	test_positions();
	test_defaults();
	test_values();
	test_chap_required();
	test_testing();
	test_default_config();
	test_etc();
	test_docs();
	test_files();
	test_alua();
	test_rbd_defaults();
	test_rbd_pr();
	test_redirect();
	test_qos();
	return tap_done();
}
