/* Latency buckets, label escaping, the Prometheus text and the HTTP request parser. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mgmt/http.h"
#include "mgmt/metrics.h"
#include "tap.h"

static void test_buckets(void)
{
	char le[32];

	CHECK_EQ(ix_lat_bucket(0), 0);          /* < 1 us */
	CHECK_EQ(ix_lat_bucket(999), 0);
	CHECK_EQ(ix_lat_bucket(1000), 1);       /* 1 us: < 2 us */
	CHECK_EQ(ix_lat_bucket(1999), 1);
	CHECK_EQ(ix_lat_bucket(2000), 2);
	CHECK_EQ(ix_lat_bucket(100000), 7);     /* 100 us: 2^6 <= .. < 2^7 */
	CHECK_EQ(ix_lat_bucket(100000000), 17); /* 100 ms: 2^16 us <= .. < 2^17 us */
	CHECK_EQ(ix_lat_bucket(4194303999ull), 22);
	CHECK_EQ(ix_lat_bucket(4194304000ull), IX_LAT_BUCKETS - 1);
	CHECK_EQ(ix_lat_bucket(UINT64_MAX), IX_LAT_BUCKETS - 1);
	metrics_bucket_le(0, le, sizeof(le));
	CHECK_STR(le, "1e-06");
	metrics_bucket_le(10, le, sizeof(le));
	CHECK_STR(le, "0.001024");
	metrics_bucket_le(22, le, sizeof(le));
	CHECK_STR(le, "4.194304");
	metrics_bucket_le(IX_LAT_BUCKETS - 1, le, sizeof(le));
	CHECK_STR(le, "+Inf");
}

static void test_escape(void)
{
	struct mbuf b = {0};

	metrics_escape_label(&b, "a\\b\"c\nd:e");
	CHECK(b.p != NULL);
	CHECK_STR(b.p, "a\\\\b\\\"c\\nd:e");
	mbuf_free(&b);
}

static void test_format(void)
{
	struct ix_lun_stats l = {.lun = 3, .cmds_read = 2, .bytes_read = 8192, .lat_sum_ns = 1500};
	struct ix_tgt_stats t = {.logins_accepted = 1, .sessions = {1}};
	struct ix_worker_stats w[2] = {{.id = 0, .sleeps = 7, .poll_hits = 5, .poller_hits = 4, .poll_ns = 2500000},
				       {.id = 1, .poll_backoffs = 3, .task_slots = 24,
					.pdu_descriptors = 48, .buffer_bytes = 8192, .trims = 2}};
	struct ix_stats st = {
	    .tgts = &t, .ntgts = 1, .luns = &l, .nluns = 1, .workers = w, .nworkers = 2};
	struct mbuf b = {0};

	strcpy(l.target, "iqn.x:t");
	strcpy(l.initiator, "iqn.\"i\"");
	strcpy(t.target, "iqn.x:t");
	l.lat[0] = 1;
	l.lat[1] = 1;
	t.logins_refused[2] = 4;
	CHECK_EQ(metrics_format(&st, &b), 0);
	CHECK(strstr(b.p, "# TYPE ix_lun_read_bytes_total counter\n") != NULL);
	CHECK(strstr(b.p, "ix_lun_read_bytes_total{target=\"iqn.x:t\",lun=\"3\","
			  "initiator=\"iqn.\\\"i\\\"\"} 8192\n") != NULL);
	CHECK(strstr(b.p, ",le=\"1e-06\"} 1\n") != NULL);
	CHECK(strstr(b.p, ",le=\"2e-06\"} 2\n") != NULL); /* cumulative */
	CHECK(strstr(b.p, ",le=\"+Inf\"} 2\n") != NULL);
	CHECK(strstr(b.p, "_count{target=\"iqn.x:t\",lun=\"3\",initiator=\"iqn.\\\"i\\\"\"} 2\n"));
	CHECK(strstr(b.p, "_sum{target=\"iqn.x:t\",lun=\"3\",initiator=\"iqn.\\\"i\\\"\"} "
			  "0.000001500\n"));
	CHECK(strstr(b.p, "ix_target_logins_refused_total{target=\"iqn.x:t\","
			  "reason=\"authorization_failed\"} 4\n") != NULL);
	CHECK(strstr(b.p, "reason=\"not_found\"") == NULL); /* zero: omitted */
	CHECK(strstr(b.p, "ix_target_sessions{target=\"iqn.x:t\",transport=\"tcp\"} 1\n"));
	CHECK(strstr(b.p, "# TYPE ix_worker_sleeps_total counter\n") != NULL);
	CHECK(strstr(b.p, "ix_worker_sleeps_total{worker=\"0\"} 7\n") != NULL);
	CHECK(strstr(b.p, "ix_worker_poll_hits_total{worker=\"0\"} 5\n") != NULL);
	CHECK(strstr(b.p, "ix_worker_poller_hits_total{worker=\"0\"} 4\n") != NULL);
	CHECK(strstr(b.p, "ix_worker_poll_backoffs_total{worker=\"1\"} 3\n") != NULL);
	CHECK(strstr(b.p, "ix_worker_poll_seconds_total{worker=\"0\"} 0.002500000\n") != NULL);
	CHECK(strstr(b.p, "ix_worker_trims_total{worker=\"1\"} 2\n") != NULL);
	CHECK(strstr(b.p, "# TYPE ix_worker_task_slots gauge\n") != NULL);
	CHECK(strstr(b.p, "ix_worker_task_slots{worker=\"1\"} 24\n") != NULL);
	CHECK(strstr(b.p, "ix_worker_task_slots{worker=\"0\"} 0\n") != NULL);
	CHECK(strstr(b.p, "ix_worker_pdu_descriptors{worker=\"1\"} 48\n") != NULL);
	CHECK(strstr(b.p, "ix_worker_buffer_bytes{worker=\"1\"} 8192\n") != NULL);
	mbuf_free(&b);
}

/* The space of the LUNs' stores: gauges per target and LUN; a used count not known is left
 * out. */
static void test_space(void)
{
	struct ix_space_stats sp[2] = {
	    {.lun = 0, .total = 1000, .avail = 150, .used = 800, .threshold = 80, .reached = true},
	    {.lun = 5, .total = 4096, .avail = 4096, .used = UINT64_MAX}};
	struct ix_stats st = {.spaces = sp, .nspaces = 2};
	struct mbuf b = {0};
	json_t *j, *a;

	strcpy(sp[0].target, "iqn.x:\"t\"");
	strcpy(sp[1].target, "iqn.x:u");
	CHECK_EQ(metrics_format(&st, &b), 0);
	CHECK(strstr(b.p, "# TYPE ix_lun_space_available_bytes gauge\n") != NULL);
	CHECK(strstr(b.p, "ix_lun_space_total_bytes{target=\"iqn.x:\\\"t\\\"\",lun=\"0\"} 1000\n"));
	CHECK(strstr(b.p, "ix_lun_space_available_bytes{target=\"iqn.x:u\",lun=\"5\"} 4096\n"));
	CHECK(strstr(b.p, "ix_lun_space_used_bytes{target=\"iqn.x:\\\"t\\\"\",lun=\"0\"} 800\n"));
	CHECK(strstr(b.p, "ix_lun_space_used_bytes{target=\"iqn.x:u\"") == NULL);
	CHECK(strstr(b.p, "ix_lun_thin_threshold_reached{target=\"iqn.x:\\\"t\\\"\",lun=\"0\"} 1\n"));
	CHECK(strstr(b.p, "ix_lun_thin_threshold_reached{target=\"iqn.x:u\",lun=\"5\"} 0\n"));
	mbuf_free(&b);
	j = metrics_json(&st);
	a = json_object_get(j, "space");
	CHECK_EQ(json_array_size(a), 2);
	CHECK_EQ(json_integer_value(json_object_get(json_array_get(a, 0), "used_bytes")), 800);
	CHECK(json_is_true(json_object_get(json_array_get(a, 0), "threshold_reached")));
	CHECK_EQ(json_integer_value(json_object_get(json_array_get(a, 0), "thin_threshold")), 80);
	CHECK(json_object_get(json_array_get(a, 1), "used_bytes") == NULL);
	CHECK_EQ(json_integer_value(json_object_get(json_array_get(a, 1), "available_bytes")),
		 4096);
	json_decref(j);
}

static void test_parse(void)
{
	struct http_req rq;
	const char *ok = "GET /metrics?a=b HTTP/1.1\r\nHost: x\r\n\r\n";
	char big[HTTP_MAX_REQUEST + 10];

	CHECK_EQ(http_parse_request(ok, strlen(ok), &rq), (int)strlen(ok));
	CHECK_STR(rq.method, "GET");
	CHECK_STR(rq.path, "/metrics");
	CHECK_EQ(http_parse_request(ok, 10, &rq), 0);
	CHECK_EQ(http_parse_request("GET /m HTTP/1.0\n\n", 17, &rq), 17);
	CHECK_EQ(http_parse_request("garbage\r\n\r\n", 11, &rq), -EBADMSG);
	CHECK_EQ(http_parse_request("GET metrics HTTP/1.1\r\n\r\n", 24, &rq), -EBADMSG);
	CHECK_EQ(http_parse_request("GET /m HTTP/2.0\r\n\r\n", 19, &rq), -EBADMSG);
	CHECK_EQ(http_parse_request("GET /m\0 HTTP/1.1\r\n\r\n", 20, &rq), -EBADMSG);
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET / HTTP/1.1\r\n", 16);
	CHECK_EQ(http_parse_request(big, sizeof(big), &rq), -EMSGSIZE);
	CHECK_EQ(http_parse_request(big + 16, sizeof(big) - 16, &rq), 0); /* no line end yet */
	memset(big, 'a', sizeof(big));
	CHECK_EQ(http_parse_request(big, sizeof(big), &rq), -EMSGSIZE);
}

int main(void)
{
	test_buckets();
	test_escape();
	test_format();
	test_space();
	test_parse();
	return tap_done();
}
