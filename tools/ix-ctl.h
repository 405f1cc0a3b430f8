/* ix-ctl: what its files share (ix-ctl.c: the socket, the printing, the configuration
 * commands; ix-ctl_cmds.c: sessions, statistics, ALUA, save; ix-ctl_call.c: call, methods). */
#ifndef IX_CTL_H
#define IX_CTL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

enum { EXIT_REFUSED = 1, EXIT_USAGE = 2, EXIT_UNREACHABLE = 3 };

extern bool opt_json, opt_dry_run;

int die_usage(const char *fmt, const char *arg);
void print_json(json_t *v);
int fetch(const char *method, json_t *params, json_t **result);
int show(const char *method, json_t *params, void (*text)(json_t *result));
int run(const char *method, json_t *params, const char *done_text);
const char *jstr(json_t *o, const char *k, const char *def);
void print_value(json_t *v);
int parse_int(const char *s, long long min, long long max, long long *out);

int cmd_sessions(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_session(int argc, char **argv);
int cmd_alua(int argc, char **argv);
int cmd_save(int argc, char **argv);
int cmd_call(int argc, char **argv);
int cmd_methods(int argc, char **argv);
int cmd_snap(int argc, char **argv); /* ix-ctl_snap.c */
int cmd_import(int argc, char **argv);
int cmd_group(int argc, char **argv); /* ix-ctl_group.c */

#endif
