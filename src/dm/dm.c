#include "dm/dm.h"

#include <errno.h>
#include <stdio.h>
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

const struct dm_ops *dm_transport(size_t i)
{
	_Static_assert(sizeof(transports) / sizeof(transports[0]) <= DM_MAX_TRANSPORTS,
		       "DM_MAX_TRANSPORTS");
	return i < sizeof(transports) / sizeof(transports[0]) ? transports[i] : NULL;
}

int dm_find_id(const char *name)
{
	for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++)
		if (strcmp(transports[i]->name, name) == 0)
			return (int)i;
	return -ENOENT;
}

int dm_transport_id(const struct dm_ops *dm)
{
	return dm && dm->name ? dm_find_id(dm->name) : -ENOENT;
}

const char *dm_names(const char *quote, const char *last, char *out, size_t cap)
{
	size_t n = sizeof(transports) / sizeof(transports[0]), o = 0;

	if (cap)
		out[0] = '\0';
	for (size_t i = 0; i < n && o < cap; i++) {
		const char *sep = i == 0 ? "" : i + 1 < n ? ", " : last;
		int w = snprintf(out + o, cap - o, "%s%s%s%s", sep, quote, transports[i]->name,
				 quote);
		o += w > 0 ? (size_t)w : 0;
	}
	return out;
}

int dm_listen(const struct dm_ops *dm, struct ev_loop *loop, const char *addr, uint16_t port,
	      dm_incoming_cb cb, void *arg, struct dm_listener **out)
{
	if (!dm->listen)
		return -EOPNOTSUPP;
	return dm->listen(loop, addr, port, cb, arg, out);
}

void dm_listener_pause(struct dm_listener *l, unsigned ms)
{
	if (l->dm->listener_pause)
		l->dm->listener_pause(l, ms);
}

bool dm_listener_can_hold(const struct dm_listener *l)
{
	return l->dm->listener_pause && l->dm->listener_resume;
}

void dm_listener_resume(struct dm_listener *l)
{
	if (l->dm->listener_resume)
		l->dm->listener_resume(l);
}

void dm_listener_free(struct dm_listener *l)
{
	if (l)
		l->dm->listener_free(l);
}

struct iscsi_conn *dm_accept(struct dm_incoming *in, const struct dm_conn_setup *cs)
{
	return in->dm->accept(in, cs);
}

void dm_reject(struct dm_incoming *in)
{
	if (in)
		in->dm->reject(in);
}

struct iscsi_conn *dm_connect(const struct dm_ops *dm, const char *host, uint16_t port,
			      const struct dm_conn_setup *cs, int *err)
{
	if (!dm->connect) {
		*err = -EOPNOTSUPP;
		return NULL;
	}
	return dm->connect(host, port, cs, err);
}
