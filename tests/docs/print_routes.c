/* Prints the manager's route table (manager_routes[], src/manager/http/api.c)
 * one route a line: "METHOD PATTERN AUTH [stream-body]", AUTH the route's
 * flags without HTTPD_ROUTE_STREAM_BODY (api.c's enum route_auth: 0 public,
 * 1 user keypair, 2 agents, 4 the app proxy). check_openapi.py compares
 * it with docs/openapi.yaml. The table is printed from the very array the
 * manager serves, not parsed out of the C source, so the check follows the
 * table however its lines come to be written. */
#include <stdio.h>

#include "manager/http/internal.h"

int main(void)
{
	for (size_t i = 0; i < manager_n_routes; i++) {
		const struct httpd_route *r = &manager_routes[i];
		printf("%s %s %d%s\n", r->method, r->pattern, r->flags & ~HTTPD_ROUTE_STREAM_BODY,
		       r->flags & HTTPD_ROUTE_STREAM_BODY ? " stream-body" : "");
	}
	return 0;
}
