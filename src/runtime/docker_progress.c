#include "runtime/docker_progress.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

void docker_progress_init(struct docker_progress *p)
{
	memset(p, 0, sizeof(*p));
}

void docker_progress_free(struct docker_progress *p)
{
	free(p->line);
	p->line = NULL;
	p->len = p->alloc = 0;
}

static struct docker_progress_layer *layer(struct docker_progress *p, const char *id)
{
	for (size_t i = 0; i < p->n_layers; i++)
		if (!strcmp(p->layers[i].id, id))
			return &p->layers[i];
	if (p->n_layers == DOCKER_PROGRESS_MAX_LAYERS || strlen(id) >= sizeof(p->layers[0].id))
		return NULL;
	struct docker_progress_layer *l = &p->layers[p->n_layers++];
	memset(l, 0, sizeof(*l));
	snprintf(l->id, sizeof(l->id), "%s", id);
	return l;
}

/* An integer of the detail, or -1 when absent, not an integer or negative. */
static int64_t detail(json_t *d, const char *key)
{
	json_t *v = json_object_get(d, key);
	return json_is_integer(v) && json_integer_value(v) >= 0 ? (int64_t)json_integer_value(v) : -1;
}

static void read_line(struct docker_progress *p, const char *s, size_t n)
{
	json_t *j = json_loadb(s, n, 0, NULL);
	if (!json_is_object(j)) {
		json_decref(j);
		return;
	}
	p->lines++;
	const char *error = json_string_value(json_object_get(j, "error"));
	const char *detail_msg = json_string_value(json_object_get(json_object_get(j, "errorDetail"), "message"));
	if ((error || detail_msg) && !p->error[0])
		snprintf(p->error, sizeof(p->error), "%s", detail_msg && *detail_msg ? detail_msg : error);
	const char *status = json_string_value(json_object_get(j, "status"));
	const char *id = json_string_value(json_object_get(j, "id"));
	json_t *d = json_object_get(j, "progressDetail");
	if (status && (!id || !*id)) {
		snprintf(p->status, sizeof(p->status), "%s", status);
	} else if (status && id) {
		struct docker_progress_layer *l = layer(p, id);
		int64_t cur = detail(d, "current"), tot = detail(d, "total");
		if (l && (!strcmp(status, "Downloading") || !strcmp(status, "Pushing"))) {
			/* A push also reports its compressed bytes; "Extracting"
			 * counts the same bytes again, so only the transfer is
			 * followed. */
			if (tot > 0)
				l->total = tot;
			if (cur >= 0)
				l->current = l->total > 0 && cur > l->total ? l->total : cur;
		} else if (l && (!strcmp(status, "Download complete") || !strcmp(status, "Pull complete") ||
				 !strcmp(status, "Already exists") || !strcmp(status, "Pushed") ||
				 !strcmp(status, "Layer already exists") || !strcmp(status, "Mounted from"))) {
			l->done = true;
			l->current = l->total;
		}
	}
	json_decref(j);
}

int docker_progress_feed(struct docker_progress *p, const char *data, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (data[i] == '\n' || data[i] == '\r') {
			if (!p->skipping && p->len)
				read_line(p, p->line, p->len);
			p->len = 0;
			p->skipping = false;
			continue;
		}
		if (p->skipping)
			continue;
		if (p->len + 1 >= DOCKER_PROGRESS_LINE_MAX) {
			p->skipping = true;
			p->len = 0;
			continue;
		}
		if (p->len + 1 >= p->alloc) {
			size_t na = p->alloc ? p->alloc * 2 : 512;
			char *nl = realloc(p->line, na);
			if (!nl)
				return -ENOMEM;
			p->line = nl;
			p->alloc = na;
		}
		p->line[p->len++] = data[i];
	}
	return 0;
}

void docker_progress_finish(struct docker_progress *p)
{
	if (!p->skipping && p->len)
		read_line(p, p->line, p->len);
	p->len = 0;
	p->skipping = false;
}

void docker_progress_sum(const struct docker_progress *p, int64_t *current, int64_t *total)
{
	int64_t c = 0, t = 0;
	for (size_t i = 0; i < p->n_layers; i++) {
		const struct docker_progress_layer *l = &p->layers[i];
		/* Sizes come from outside: saturate instead of overflowing. */
		if (l->total > INT64_MAX - t || l->current > INT64_MAX - c)
			break;
		/* Bytes of a layer count once its size is known, never past it. */
		t += l->total;
		c += l->done || l->current > l->total ? l->total : l->current;
	}
	*current = c;
	*total = t;
}
