/* RBD ownership's owner record and hand-over messages (src/ha/ha_own_rec.c): round
 * trips, a hand-written record (the format is a contract between gateways of different
 * builds), damaged records each refused with the line at fault and an empty result, the
 * messages and replies (the hand-over rule: test_policy.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ha/ha_own_rec.h"
#include "tap.h"
#include "util/bytes.h"

static const char hand[] = "ix-own 1\n"
			   "gen 7\n"
			   "holder 10.1.2.3:0/123456\n"
			   "gid 4117\n"
			   "groups 1,3\n"
			   "ports 1,5\n";

/* hand plus its checksum line: the object a gateway of this format writes. */
static size_t with_sum(char *buf, size_t len, const char *body)
{
	return (size_t)snprintf(buf, len, "%ssum %016llx\n", body,
				(unsigned long long)fnv1a64(FNV1A64_INIT, body, strlen(body)));
}

static void test_round_trip(void)
{
	struct ha_own_rec r = {.gen = 42,
			       .gid = 99,
			       .ngroups = 2,
			       .nports = 1,
			       .groups = {2, 65535},
			       .ports = {7}},
			  back;
	char buf[HA_OWN_REC_MAX], err[128];
	int n;

	snprintf(r.holder, sizeof(r.holder), "127.0.0.1:0/3723540281");
	n = ha_own_rec_encode(&r, buf, sizeof(buf));
	CHECK(n > 0);
	CHECK_EQ(ha_own_rec_decode(buf, (size_t)n, &back, err, sizeof(err)), 0);
	CHECK_EQ(back.gen, 42);
	CHECK_EQ(back.gid, 99);
	CHECK_STR(back.holder, "127.0.0.1:0/3723540281");
	CHECK_EQ(back.ngroups, 2);
	CHECK_EQ(back.groups[0], 2);
	CHECK_EQ(back.groups[1], 65535);
	CHECK_EQ(back.nports, 1);
	CHECK_EQ(back.ports[0], 7);
	/* none: "-" */
	r.ngroups = r.nports = 0;
	n = ha_own_rec_encode(&r, buf, sizeof(buf));
	CHECK(n > 0 && strstr(buf, "groups -\nports -\n") != NULL);
	CHECK_EQ(ha_own_rec_decode(buf, (size_t)n, &back, err, sizeof(err)), 0);
	CHECK_EQ(back.ngroups, 0);
	CHECK_EQ(back.nports, 0);
	/* bad fields are not written */
	r.holder[0] = 0;
	CHECK_EQ(ha_own_rec_encode(&r, buf, sizeof(buf)), -EINVAL);
	snprintf(r.holder, sizeof(r.holder), "a b");
	CHECK_EQ(ha_own_rec_encode(&r, buf, sizeof(buf)), -EINVAL);
	snprintf(r.holder, sizeof(r.holder), "x");
	r.ngroups = 1;
	r.groups[0] = 0;
	CHECK_EQ(ha_own_rec_encode(&r, buf, sizeof(buf)), -EINVAL);
	r.groups[0] = 1;
	CHECK_EQ(ha_own_rec_encode(&r, buf, 20), -ENOSPC);
}

static void test_hand_written(void)
{
	struct ha_own_rec r;
	char buf[HA_OWN_REC_MAX], again[HA_OWN_REC_MAX], err[128];
	size_t n = with_sum(buf, sizeof(buf), hand);

	CHECK_EQ(ha_own_rec_decode(buf, n, &r, err, sizeof(err)), 0);
	CHECK_EQ(r.gen, 7);
	CHECK_STR(r.holder, "10.1.2.3:0/123456");
	CHECK_EQ(r.gid, 4117);
	CHECK_EQ(r.ngroups, 2);
	CHECK_EQ(r.groups[1], 3);
	CHECK_EQ(r.ports[1], 5);
	/* and the encoder writes exactly that */
	CHECK_EQ(ha_own_rec_encode(&r, again, sizeof(again)), (int)n);
	CHECK_MEM(again, buf, n);
	CHECK_EQ(ha_own_rec_decode("", 0, &r, err, sizeof(err)), -ENOENT);
}

/* Each damaged record: -EINVAL, a message naming the line, nothing decoded. */
static void damaged(const char *body, bool sum, const char *line)
{
	struct ha_own_rec r;
	char buf[HA_OWN_REC_MAX], err[128] = "";
	size_t n =
	    sum ? with_sum(buf, sizeof(buf), body) : (size_t)snprintf(buf, sizeof(buf), "%s", body);

	memset(&r, 0xa5, sizeof(r));
	CHECK_EQ(ha_own_rec_decode(buf, n, &r, err, sizeof(err)), -EINVAL);
	CHECK(strncmp(err, line, strlen(line)) == 0);
	CHECK_EQ(r.gen, 0);
	CHECK_EQ(r.holder[0], 0);
	CHECK_EQ(r.ngroups, 0);
}

static void test_damaged(void)
{
	char buf[HA_OWN_REC_MAX];
	size_t n = with_sum(buf, sizeof(buf), hand);

	damaged("ix-own 2\ngen 1\n", true, "line 1:");
	damaged("garbage", false, "line 1:");
	damaged("ix-own 1\ngen 07\nholder a\ngid 1\ngroups -\nports -\n", true, "line 2:");
	damaged("ix-own 1\ngen 1\nholder \ngid 1\ngroups -\nports -\n", true, "line 3:");
	damaged("ix-own 1\ngen 1\nholder a b\ngid 1\ngroups -\nports -\n", true, "line 3:");
	{ /* a NUL in the holder (found by the fuzzer): not the name it would decode to */
		static const char nul[] =
		    "ix-own 1\ngen 1\nholder a\0b\ngid 1\ngroups -\nports -\n";
		struct ha_own_rec r;
		char nb[HA_OWN_REC_MAX], err[128] = "";
		size_t nn = sizeof(nul) - 1;

		memcpy(nb, nul, nn);
		nn += (size_t)snprintf(nb + nn, sizeof(nb) - nn, "sum %016llx\n",
				       (unsigned long long)fnv1a64(FNV1A64_INIT, nb, nn));
		CHECK_EQ(ha_own_rec_decode(nb, nn, &r, err, sizeof(err)), -EINVAL);
		CHECK(strncmp(err, "line 3:", 7) == 0);
	}
	damaged("ix-own 1\ngen 1\nholder a\ngid x\ngroups -\nports -\n", true, "line 4:");
	damaged("ix-own 1\ngen 1\nholder a\ngid 1\ngroups 0\nports -\n", true, "line 5:");
	damaged("ix-own 1\ngen 1\nholder a\ngid 1\ngroups 1,,2\nports -\n", true, "line 5:");
	damaged("ix-own 1\ngen 1\nholder a\ngid 1\ngroups 65536\nports -\n", true, "line 5:");
	damaged("ix-own 1\ngen 1\nholder a\ngid 1\ngroups -\n"
		"ports 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17\n",
		true, "line 6:");
	damaged("ix-own 1\ngen 1\nholder a\ngid 1\nports -\ngroups -\n", true, "line 5:");
	damaged("ix-own 1\ngen 1\nholder a\ngid 1\ngroups -\nports -\n", false, "line 7:");
	damaged("ix-own 1\ngen 1\nholder a\ngid 1\ngroups -\nports -\nsum 0\n", false, "line 7:");
	/* a flipped byte, a missing newline, something after the checksum */
	buf[12] ^= 1;
	{
		struct ha_own_rec r;
		char err[128];

		CHECK_EQ(ha_own_rec_decode(buf, n, &r, err, sizeof(err)), -EINVAL);
		buf[12] ^= 1;
		CHECK_EQ(ha_own_rec_decode(buf, n - 1, &r, err, sizeof(err)), -EINVAL);
		CHECK(strstr(err, "newline") != NULL);
		buf[n] = 'x';
		CHECK_EQ(ha_own_rec_decode(buf, n + 1, &r, err, sizeof(err)), -EINVAL);
		CHECK(strstr(err, "after") != NULL);
		CHECK_EQ(ha_own_rec_decode(buf, n, &r, err, sizeof(err)), 0);
	}
}

static void test_msgs(void)
{
	struct ha_own_msg m = {.kind = HA_OWN_ASK,
			       .ask = HA_OWN_IMPLICIT,
			       .window_ms = 3000,
			       .gid = 4117},
			  back;
	char buf[HA_OWN_MSG_MAX];
	int n = ha_own_msg_encode(&m, buf, sizeof(buf));

	CHECK(n > 0);
	CHECK_MEM(buf, "ix-own-ask 1 implicit 3000 4117\n", (size_t)n);
	CHECK_EQ(ha_own_msg_decode(buf, (size_t)n, &back), 0);
	CHECK_EQ(back.kind, HA_OWN_ASK);
	CHECK_EQ(back.ask, HA_OWN_IMPLICIT);
	CHECK_EQ(back.window_ms, 3000);
	CHECK_EQ(back.gid, 4117);
	m = (struct ha_own_msg){.kind = HA_OWN_FREE, .group = 3, .gid = 18446744073709551615ull};
	n = ha_own_msg_encode(&m, buf, sizeof(buf));
	CHECK_MEM(buf, "ix-own-free 1 3 18446744073709551615\n", (size_t)n);
	CHECK_EQ(ha_own_msg_decode(buf, (size_t)n, &back), 0);
	CHECK_EQ(back.kind, HA_OWN_FREE);
	CHECK_EQ(back.group, 3);
	CHECK_EQ(back.gid, 18446744073709551615ull);
	CHECK_EQ(ha_own_msg_decode("ix-own-ask 1 explicit 0 1\n", 26, &back), 0);
	CHECK_EQ(back.ask, HA_OWN_EXPLICIT);
	CHECK_EQ(ha_own_msg_decode("ix-own-ask 1 heal 0 7\n", 22, &back), 0);
	CHECK_EQ(back.ask, HA_OWN_HEAL);
	CHECK_EQ(ha_own_msg_encode(&back, buf, sizeof(buf)), 22);
	CHECK_MEM(buf, "ix-own-ask 1 heal 0 7\n", 22);
	/* not messages of this protocol */
	CHECK_EQ(ha_own_msg_decode("ix-own-ask 1 explicit 0 1", 25, &back), -EINVAL);
	CHECK_EQ(ha_own_msg_decode("ix-own-ask 2 explicit 0 1\n", 26, &back), -EINVAL);
	CHECK_EQ(ha_own_msg_decode("ix-own-ask 1 sometimes 0 1\n", 27, &back), -EINVAL);
	CHECK_EQ(ha_own_msg_decode("ix-own-ask 1 explicit 0 1 2\n", 28, &back), -EINVAL);
	CHECK_EQ(ha_own_msg_decode("ix-own-free 1 65536 1\n", 22, &back), -EINVAL);
	CHECK_EQ(ha_own_msg_decode("ix-own-free 1  1\n", 17, &back), -EINVAL);
	CHECK_EQ(ha_own_msg_decode("ix-lu-reset 1 0123\n", 19, &back), -EINVAL);
	CHECK_EQ(back.kind, 0);
	/* found by the fuzzer: a failed decode leaves nothing set; one spelling only */
	CHECK_EQ(ha_own_msg_decode("ix-own-ask 1\0implicit 3000 4\n", 29, &back), -EINVAL);
	CHECK_EQ(back.kind, 0);
	CHECK_EQ(ha_own_msg_decode("ix-own-free 1 3 411 \n", 21, &back), -EINVAL);
	CHECK_EQ(back.gid, 0);
	m.kind = 0;
	CHECK_EQ(ha_own_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
}

static void test_replies(void)
{
	CHECK_EQ(ha_own_reply_kind("released", 8), HA_OWN_RELEASED);
	CHECK_EQ(ha_own_reply_kind("refused", 7), HA_OWN_REFUSED);
	CHECK_EQ(ha_own_reply_kind("refused I/O 200 ms ago", 22), HA_OWN_REFUSED);
	CHECK_EQ(ha_own_reply_kind("refusedx", 8), HA_OWN_NOT_HOLDER);
	CHECK_EQ(ha_own_reply_kind("standby", 7), HA_OWN_NOT_HOLDER);
	CHECK_EQ(ha_own_reply_kind("", 0), HA_OWN_NOT_HOLDER);
	CHECK_EQ(ha_own_reply_kind("releasedd", 9), HA_OWN_NOT_HOLDER);
}

static void test_snap(void)
{
	struct ha_own_msg m = {.kind = HA_OWN_SNAP, .window_ms = 10000, .gid = 4117, .lun = 3},
			  back;
	char buf[HA_OWN_MSG_MAX], msg[64];
	unsigned held;
	int n, rc;
	static const char want[] = "ix-own-snap 1 10000 4117 3 iqn.2024-01.org.ix:t s1.a_b-c\n";

	snprintf(m.target, sizeof(m.target), "iqn.2024-01.org.ix:t");
	snprintf(m.name, sizeof(m.name), "s1.a_b-c");
	n = ha_own_msg_encode(&m, buf, sizeof(buf));
	CHECK_EQ(n, (int)sizeof(want) - 1);
	CHECK_MEM(buf, want, sizeof(want) - 1);
	CHECK_EQ(ha_own_msg_decode(buf, (size_t)n, &back), 0);
	CHECK_EQ(back.kind, HA_OWN_SNAP);
	CHECK_EQ(back.window_ms, 10000);
	CHECK_EQ(back.gid, 4117);
	CHECK_EQ(back.lun, 3);
	CHECK_STR(back.target, "iqn.2024-01.org.ix:t");
	CHECK_STR(back.name, "s1.a_b-c");
	/* a name the API would refuse, a target with a space, a missing or extra field */
	snprintf(m.name, sizeof(m.name), "-s");
	CHECK_EQ(ha_own_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
	snprintf(m.name, sizeof(m.name), "s");
	snprintf(m.target, sizeof(m.target), "a b");
	CHECK_EQ(ha_own_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
	CHECK_EQ(ha_own_msg_decode("ix-own-snap 1 10 4 0 t s/x\n", 27, &back), -EINVAL);
	CHECK_EQ(back.kind, 0);
	CHECK_EQ(ha_own_msg_decode("ix-own-snap 1 10 4 0 t\n", 23, &back), -EINVAL);
	CHECK_EQ(ha_own_msg_decode("ix-own-snap 1 10 4 0 t s x\n", 27, &back), -EINVAL);
	CHECK_EQ(ha_own_msg_decode("ix-own-snap 1 10 4 4294967296 t s\n", 34, &back), -EINVAL);
	CHECK_EQ(ha_own_msg_decode("ix-own-snap 1 10 4 0 t\x01 s\n", 25, &back), -EINVAL);
	CHECK_EQ(ha_own_msg_decode("ix-own-snap 1 10 4 0 t s\n", 25, &back), 0);
	CHECK_STR(back.name, "s");
	/* the holder's answers */
	n = ha_own_snap_reply_encode(0, 812, NULL, buf, sizeof(buf));
	CHECK_MEM(buf, "snap-done 812", (size_t)n);
	CHECK_EQ(ha_own_snap_reply_decode(buf, (size_t)n, &rc, &held, msg, sizeof(msg)), 0);
	CHECK_EQ(rc, 0);
	CHECK_EQ(held, 812);
	n = ha_own_snap_reply_encode(-EEXIST, 0, "t LUN 0: snapshot s exists", buf, sizeof(buf));
	CHECK_EQ(ha_own_snap_reply_decode(buf, (size_t)n, &rc, &held, msg, sizeof(msg)), 0);
	CHECK_EQ(rc, -EEXIST);
	CHECK_STR(msg, "t LUN 0: snapshot s exists");
	CHECK_EQ(ha_own_snap_reply_decode("standby", 7, &rc, &held, msg, sizeof(msg)), -EINVAL);
	CHECK_EQ(ha_own_snap_reply_decode("", 0, &rc, &held, msg, sizeof(msg)), -EINVAL);
	CHECK_EQ(ha_own_snap_reply_decode("snap-done", 9, &rc, &held, msg, sizeof(msg)), -EINVAL);
	CHECK_EQ(ha_own_snap_reply_decode("snap-done 1 2", 13, &rc, &held, msg, sizeof(msg)),
		 -EINVAL);
	CHECK_EQ(ha_own_snap_reply_decode("snap-failed 0 x", 15, &rc, &held, msg, sizeof(msg)),
		 -EINVAL);
	CHECK_EQ(ha_own_snap_reply_decode("snap-failed 5", 13, &rc, &held, msg, sizeof(msg)),
		 -EINVAL);
	CHECK_EQ(ha_own_snap_reply_decode("snap-failed 4096 x", 18, &rc, &held, msg, sizeof(msg)),
		 -EINVAL);
	CHECK_EQ(ha_own_snap_reply_encode(1, 0, "x", buf, sizeof(buf)), -EINVAL);
	/* a long message is cut to the caller's buffer */
	CHECK_EQ(ha_own_snap_reply_decode("snap-failed 5 0123456789", 24, &rc, &held, msg, 5), 0);
	CHECK_STR(msg, "0123");
}

static void test_offline(void)
{
	struct ha_own_msg m = {.kind = HA_OWN_OFFLINE, .window_ms = 12000, .gid = 4117, .lun = 2},
			  back;
	char buf[HA_OWN_MSG_MAX], who[HA_OWN_WHO_MAX];
	unsigned users;
	int n, rc;
	static const char off[] = "ix-own-offline 1 12000 4117 2 iqn.2024-01.org.ix:t\n";
	static const char on[] = "ix-own-online 1 1 4117 2 iqn.2024-01.org.ix:t\n";

	snprintf(m.target, sizeof(m.target), "iqn.2024-01.org.ix:t");
	n = ha_own_msg_encode(&m, buf, sizeof(buf));
	CHECK_EQ(n, (int)sizeof(off) - 1);
	CHECK_MEM(buf, off, sizeof(off) - 1);
	CHECK_EQ(ha_own_msg_decode(buf, (size_t)n, &back), 0);
	CHECK_EQ(back.kind, HA_OWN_OFFLINE);
	CHECK_EQ(back.window_ms, 12000);
	CHECK_EQ(back.gid, 4117);
	CHECK_EQ(back.lun, 2);
	CHECK_STR(back.target, "iqn.2024-01.org.ix:t");
	m.kind = HA_OWN_ONLINE;
	m.changed = true;
	n = ha_own_msg_encode(&m, buf, sizeof(buf));
	CHECK_EQ(n, (int)sizeof(on) - 1);
	CHECK_MEM(buf, on, sizeof(on) - 1);
	CHECK_EQ(ha_own_msg_decode(buf, (size_t)n, &back), 0);
	CHECK_EQ(back.kind, HA_OWN_ONLINE);
	CHECK_EQ(back.changed, true);
	CHECK_EQ(back.window_ms, 0);
	CHECK_EQ(ha_own_msg_decode("ix-own-online 1 0 4 0 t\n", 24, &back), 0);
	CHECK_EQ(back.changed, false);
	/* a changed flag other than 0 or 1, a missing or extra field, a bad target */
	CHECK_EQ(ha_own_msg_decode("ix-own-online 1 2 4 0 t\n", 24, &back), -EINVAL);
	CHECK_EQ(back.kind, 0);
	CHECK_EQ(ha_own_msg_decode("ix-own-online 1 1 4 0\n", 22, &back), -EINVAL);
	CHECK_EQ(ha_own_msg_decode("ix-own-offline 1 10 4 0 t x\n", 28, &back), -EINVAL);
	CHECK_EQ(ha_own_msg_decode("ix-own-offline 1 4294967296 4 0 t\n", 34, &back), -EINVAL);
	CHECK_EQ(ha_own_msg_decode("ix-own-offline 1 10 4 0 t\x01\n", 26, &back), -EINVAL);
	CHECK_EQ(ha_own_msg_decode("ix-own-offline 2 10 4 0 t\n", 26, &back), -EINVAL);
	snprintf(m.target, sizeof(m.target), "a b");
	CHECK_EQ(ha_own_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
	/* a standby's rollback request */
	{
		struct ha_own_msg r = {.kind = HA_OWN_ROLLBACK,
				       .window_ms = 10000,
				       .gid = 4117,
				       .lun = 1,
				       .changed = true};
		static const char rb[] = "ix-own-rollback 1 10000 4117 1 1 t g1\n";

		snprintf(r.target, sizeof(r.target), "t");
		snprintf(r.name, sizeof(r.name), "g1");
		n = ha_own_msg_encode(&r, buf, sizeof(buf));
		CHECK_EQ(n, (int)sizeof(rb) - 1);
		CHECK_MEM(buf, rb, sizeof(rb) - 1);
		CHECK_EQ(ha_own_msg_decode(buf, (size_t)n, &back), 0);
		CHECK_EQ(back.kind, HA_OWN_ROLLBACK);
		CHECK_EQ(back.changed, true);
		CHECK_EQ(back.lun, 1);
		CHECK_STR(back.name, "g1");
		CHECK_EQ(ha_own_msg_decode("ix-own-rollback 1 10 4 0 0 t s\n", 31, &back), 0);
		CHECK_EQ(back.changed, false);
		CHECK_EQ(ha_own_msg_decode("ix-own-rollback 1 10 4 0 2 t s\n", 31, &back),
			 -EINVAL);
		CHECK_EQ(ha_own_msg_decode("ix-own-rollback 1 10 4 0 t s\n", 29, &back), -EINVAL);
		CHECK_EQ(ha_own_msg_decode("ix-own-rollback 1 10 4 0 1 t -s\n", 32, &back),
			 -EINVAL);
	}
	/* the answers */
	n = ha_own_offline_reply_encode(0, 3, "127.0.0.1:3261", buf, sizeof(buf));
	CHECK_MEM(buf, "offline 3 127.0.0.1:3261", (size_t)n);
	CHECK_EQ(ha_own_offline_reply_decode(buf, (size_t)n, &rc, &users, who, sizeof(who)), 0);
	CHECK_EQ(rc, 0);
	CHECK_EQ(users, 3);
	CHECK_STR(who, "127.0.0.1:3261");
	n = ha_own_offline_reply_encode(-EBUSY, 0, "t LUN 0: a snapshot is under way", buf,
					sizeof(buf));
	CHECK_EQ(ha_own_offline_reply_decode(buf, (size_t)n, &rc, &users, who, sizeof(who)), 0);
	CHECK_EQ(rc, -EBUSY);
	CHECK_STR(who, "t LUN 0: a snapshot is under way");
	CHECK_EQ(ha_own_offline_reply_encode(0, 1, "a b", buf, sizeof(buf)), -EINVAL);
	CHECK_EQ(ha_own_offline_reply_encode(0, 1, "", buf, sizeof(buf)), -EINVAL);
	CHECK_EQ(ha_own_offline_reply_encode(1, 1, "x", buf, sizeof(buf)), -EINVAL);
	CHECK_EQ(ha_own_offline_reply_decode("", 0, &rc, &users, who, sizeof(who)), -EINVAL);
	CHECK_EQ(ha_own_offline_reply_decode("offline 1", 9, &rc, &users, who, sizeof(who)),
		 -EINVAL);
	CHECK_EQ(ha_own_offline_reply_decode("offline 1 a b", 13, &rc, &users, who, sizeof(who)),
		 -EINVAL);
	CHECK_EQ(ha_own_offline_reply_decode("offline x a", 11, &rc, &users, who, sizeof(who)),
		 -EINVAL);
	CHECK_EQ(ha_own_offline_reply_decode("offline-failed 0 x", 18, &rc, &users, who,
					     sizeof(who)),
		 -EINVAL);
	CHECK_EQ(rc, 0);
	CHECK_EQ(ha_own_offline_reply_decode("snap-done 1", 11, &rc, &users, who, sizeof(who)),
		 -EINVAL);
	CHECK_EQ(ha_own_offline_reply_decode("standby", 7, &rc, &users, who, sizeof(who)), -EINVAL);
}

int main(void)
{
	test_round_trip();
	test_hand_written();
	test_damaged();
	test_msgs();
	test_replies();
	test_snap();
	test_offline();
	return tap_done();
}
