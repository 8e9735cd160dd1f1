/* Fuzz target: img_labels_parse and img_service_ports_parse. The input is
 * lines of KEY=VALUE (labels as Docker hands them over, any bytes); the
 * whole input is also one service-ports value. Nothing may crash, and
 * what parsed must keep the module's promises. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "images/labels.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	struct img_label labels[64];
	size_t n = 0;
	char *copy = strdup(s);
	for (char *line = copy, *next; line && n < 64; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = '\0';
		labels[n].key = line;
		labels[n].value = eq + 1;
		n++;
	}
	struct img_meta m;
	img_labels_parse(labels, n, &m);
	if (!m.has_min && (m.min_cpu_m || m.min_mem || m.min_fgpu_m) && m.warning[0])
		abort();   /* a bad minimum leaves none */
	if (m.n_ports > IMG_MAX_SERVICE_PORTS || m.n_frameworks > IMG_MAX_FRAMEWORKS)
		abort();
	for (size_t i = 0; i < m.n_ports; i++)
		for (int k = 0; k < m.ports[i].n_ports; k++)
			if (m.ports[i].ports[k] <= 1024 || m.ports[i].ports[k] > 65535)
				abort();
	struct img_service_port p[IMG_MAX_SERVICE_PORTS];
	size_t np = 0;
	struct terr err;
	if (img_service_ports_parse(s, p, IMG_MAX_SERVICE_PORTS, &np, &err) < 0 && np != 0)
		abort();
	free(copy);
	free(s);
	return 0;
}
