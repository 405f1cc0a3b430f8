/* The table of datamover wrappers (dm.h). Target side only: the fault wrapper is test code
 * that never goes into libix. */
#include <string.h>

#include "dm/dm.h"

extern const struct dm_wrapper fault_dm_wrapper;

static const struct dm_wrapper *const wrappers[] = {
	&fault_dm_wrapper,
};

const struct dm_wrapper *dm_find_wrapper(const char *name)
{
	for (size_t i = 0; i < sizeof(wrappers) / sizeof(wrappers[0]); i++)
		if (strcmp(wrappers[i]->name, name) == 0)
			return wrappers[i];
	return NULL;
}
