/* Docker's streamed JSON progress (runtime/docker_progress.c): the lines of
 * a real pull and push, cut anywhere; errors in the stream; lines that are
 * not Docker's. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/docker_progress.h"
#include "testlib.h"

/* Lines as dockerd 20.10 sends them for a pull from a registry. */
static const char pull_stream[] =
	"{\"status\":\"Pulling from tessera/python\",\"id\":\"3.11\"}\r\n"
	"{\"status\":\"Pulling fs layer\",\"progressDetail\":{},\"id\":\"aaa\"}\r\n"
	"{\"status\":\"Pulling fs layer\",\"progressDetail\":{},\"id\":\"bbb\"}\r\n"
	"{\"status\":\"Waiting\",\"progressDetail\":{},\"id\":\"bbb\"}\r\n"
	"{\"status\":\"Downloading\",\"progressDetail\":{\"current\":100000000,\"total\":300000000},"
	"\"progress\":\"[====>   ]\",\"id\":\"aaa\"}\r\n"
	"{\"status\":\"Downloading\",\"progressDetail\":{\"current\":312000000,\"total\":680000000},\"id\":\"bbb\"}\r\n";
static const char pull_rest[] =
	"{\"status\":\"Download complete\",\"progressDetail\":{},\"id\":\"aaa\"}\r\n"
	"{\"status\":\"Extracting\",\"progressDetail\":{\"current\":5,\"total\":300000000},\"id\":\"aaa\"}\r\n"
	"{\"status\":\"Pull complete\",\"progressDetail\":{},\"id\":\"aaa\"}\r\n"
	"{\"status\":\"Download complete\",\"progressDetail\":{},\"id\":\"bbb\"}\r\n"
	"{\"status\":\"Pull complete\",\"progressDetail\":{},\"id\":\"bbb\"}\r\n"
	"{\"status\":\"Digest: sha256:0123\"}\r\n"
	"{\"status\":\"Status: Downloaded newer image for reg:5000/tessera/python:3.11\"}";

static int feed_str(struct docker_progress *p, const char *s)
{
	return docker_progress_feed(p, s, strlen(s));
}

TEST(pull_sums_layers)
{
	struct docker_progress p;
	docker_progress_init(&p);
	int64_t cur = -1, total = -1;
	/* one byte at a time: lines are cut anywhere */
	for (size_t i = 0; i < sizeof(pull_stream) - 1; i++)
		CHECK_INT(docker_progress_feed(&p, pull_stream + i, 1), 0);
	docker_progress_sum(&p, &cur, &total);
	CHECK_INT(cur, 412000000);
	CHECK_INT(total, 980000000);
	CHECK_INT(p.n_layers, 3);   /* "3.11" carries an id too, with no bytes */
	CHECK_INT(docker_progress_feed(&p, pull_rest, sizeof(pull_rest) - 1), 0);
	docker_progress_finish(&p);   /* the last line has no newline */
	docker_progress_sum(&p, &cur, &total);
	CHECK_INT(cur, 980000000);
	CHECK_INT(total, 980000000);
	CHECK_STR(p.error, "");
	CHECK_STR(p.status, "Status: Downloaded newer image for reg:5000/tessera/python:3.11");
	docker_progress_free(&p);
}

TEST(push_and_existing_layers)
{
	static const char s[] =
		"{\"status\":\"The push refers to repository [127.0.0.1:5000/tessera-private/alice/s1]\"}\n"
		"{\"status\":\"Preparing\",\"progressDetail\":{},\"id\":\"l1\"}\n"
		"{\"status\":\"Layer already exists\",\"progressDetail\":{},\"id\":\"l0\"}\n"
		"{\"status\":\"Pushing\",\"progressDetail\":{\"current\":512,\"total\":2048},\"id\":\"l1\"}\n";
	struct docker_progress p;
	docker_progress_init(&p);
	CHECK_INT(docker_progress_feed(&p, s, sizeof(s) - 1), 0);
	int64_t cur, total;
	docker_progress_sum(&p, &cur, &total);
	CHECK_INT(cur, 512);
	CHECK_INT(total, 2048);
	CHECK_INT(feed_str(&p, "{\"status\":\"Pushed\",\"progressDetail\":{},\"id\":\"l1\"}\n"), 0);
	docker_progress_sum(&p, &cur, &total);
	CHECK_INT(cur, 2048);
	docker_progress_free(&p);
}

TEST(error_in_the_stream)
{
	static const char s[] =
		"{\"status\":\"Pulling from tessera/gone\",\"id\":\"1\"}\n"
		"{\"errorDetail\":{\"message\":\"manifest for reg:5000/tessera/gone:1 not found: manifest unknown: "
		"manifest unknown\"},\"error\":\"manifest for reg:5000/tessera/gone:1 not found\"}\n"
		"{\"error\":\"a second error is not the first\"}\n";
	struct docker_progress p;
	docker_progress_init(&p);
	CHECK_INT(docker_progress_feed(&p, s, sizeof(s) - 1), 0);
	CHECK_STR(p.error, "manifest for reg:5000/tessera/gone:1 not found: manifest unknown: manifest unknown");
	docker_progress_free(&p);
	/* "error" alone */
	docker_progress_init(&p);
	CHECK_INT(feed_str(&p, "{\"error\":\"toomanyrequests\"}\n"), 0);
	CHECK_STR(p.error, "toomanyrequests");
	docker_progress_free(&p);
}

TEST(what_is_not_docker)
{
	struct docker_progress p;
	docker_progress_init(&p);
	/* Not JSON, not an object, wrong types, negative and absurd numbers. */
	static const char s[] =
		"garbage\n[1,2]\n\"str\"\n{\"status\":5,\"id\":[]}\n"
		"{\"status\":\"Downloading\",\"progressDetail\":{\"current\":-5,\"total\":\"x\"},\"id\":\"a\"}\n"
		"{\"status\":\"Downloading\",\"progressDetail\":{\"current\":900,\"total\":100},\"id\":\"b\"}\n"
		"{\"status\":\"Downloading\",\"progressDetail\":{\"current\":9223372036854775807,"
		"\"total\":9223372036854775807},\"id\":\"c\"}\n";
	CHECK_INT(docker_progress_feed(&p, s, sizeof(s) - 1), 0);
	int64_t cur, total;
	docker_progress_sum(&p, &cur, &total);
	/* b is capped at its total; c would overflow the sum and is left out */
	CHECK_INT(cur, 100);
	CHECK_INT(total, 100);
	CHECK_STR(p.error, "");
	/* An oversized line is skipped whole, the next one is read. */
	size_t big = DOCKER_PROGRESS_LINE_MAX + 10;
	char *line = malloc(big);
	memset(line, 'x', big);
	CHECK_INT(docker_progress_feed(&p, line, big), 0);
	free(line);
	CHECK_INT(feed_str(&p, "\n{\"error\":\"after\"}\n"), 0);
	CHECK_STR(p.error, "after");
	docker_progress_free(&p);
}

TEST(many_layers)
{
	struct docker_progress p;
	docker_progress_init(&p);
	char line[160];
	for (int i = 0; i < DOCKER_PROGRESS_MAX_LAYERS + 10; i++) {
		int n = snprintf(line, sizeof(line),
				 "{\"status\":\"Downloading\",\"progressDetail\":{\"current\":1,\"total\":2},\"id\":\"l%d\"}\n", i);
		CHECK_INT(docker_progress_feed(&p, line, (size_t)n), 0);
	}
	int64_t cur, total;
	docker_progress_sum(&p, &cur, &total);
	CHECK_INT(p.n_layers, DOCKER_PROGRESS_MAX_LAYERS);
	CHECK_INT(total, 2 * DOCKER_PROGRESS_MAX_LAYERS);
	docker_progress_free(&p);
}

int main(void)
{
	RUN(pull_sums_layers);
	RUN(push_and_existing_layers);
	RUN(error_in_the_stream);
	RUN(what_is_not_docker);
	RUN(many_layers);
	return testlib_done();
}
