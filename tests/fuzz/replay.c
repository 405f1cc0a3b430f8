/* Replays fuzz inputs without libFuzzer (gcc builds, CI): every regular file named on the
 * command line, or found directly inside a directory named there, is read and passed to
 * LLVMFuzzerTestOneInput(). A harness signals a failed property by aborting. Exit status: 0,
 * or 1 if a file or directory could not be read or nothing was run. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long len;
	int ret = -1;

	if (!f) {
		perror(path);
		return -1;
	}
	if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
		goto out;
	/* Exactly sized (and never zero-sized) so that ASan sees any over-read. */
	buf = malloc(len ? (size_t)len : 1);
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len)
		goto out;
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	ret = 0;
out:
	if (ret)
		fprintf(stderr, "%s: cannot read\n", path);
	free(buf);
	fclose(f);
	return ret;
}

static int run_dir(const char *dir, int *count)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int ret = 0;

	if (!d) {
		perror(dir);
		return -1;
	}
	while ((e = readdir(d))) {
		char path[4096];
		struct stat st;

		if (e->d_name[0] == '.')
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path)) {
			ret = -1;
			continue;
		}
		if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		if (run_file(path) != 0)
			ret = -1;
		else
			(*count)++;
	}
	closedir(d);
	return ret;
}

int main(int argc, char **argv)
{
	int count = 0, failed = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			failed = 1;
		} else if (S_ISDIR(st.st_mode)) {
			failed |= run_dir(argv[i], &count) != 0;
		} else if (run_file(argv[i]) != 0) {
			failed = 1;
		} else {
			count++;
		}
	}
	printf("replayed %d input(s)\n", count);
	return failed || count == 0;
}
