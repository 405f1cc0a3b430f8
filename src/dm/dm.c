#include "dm/dm.h"

#include <string.h>

extern const struct dm_ops tcp_dm_ops;
extern const struct dm_ops iser_dm_ops;

/* The one explicit table of transports. */
static const struct dm_ops *const transports[] = {
	&tcp_dm_ops,
	&iser_dm_ops,
};

const struct dm_ops *dm_find(const char *name)
{
	for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++)
		if (strcmp(transports[i]->name, name) == 0)
			return transports[i];
	return NULL;
}
