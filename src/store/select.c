/* Which backend a `store` setting names (store.h, store_open). */
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "store/store.h"

bool store_setting_is_pg(const char *setting)
{
	if (!setting)
		return false;
	return !strncmp(setting, "postgresql://", 13) || !strncmp(setting, "postgres://", 11) ||
	       strstr(setting, "dbname=") || strstr(setting, "host=");
}

int store_open(const char *setting, const char *data_dir, const struct store_ops **ops,
	       struct store **out, char *where, size_t n, struct terr *err)
{
	if (!setting || !*setting || !strcmp(setting, "sqlite")) {
		char db[4200];
		snprintf(db, sizeof(db), "%s/tessera.db", data_dir);
		*ops = &store_sqlite_ops;
		util_strlcpy(where, db, n);
		return (*ops)->open(out, db, err);
	}
	if (!store_setting_is_pg(setting))
		return terr_set(err, EINVAL, "store '%s': expected postgresql://USER@HOST:PORT/DB (a libpq URI), "
				"or no store line for SQLite in data_dir", setting);
	*ops = &store_pg_ops;
	int rc = (*ops)->open(out, setting, err);
	if (rc == 0)
		util_strlcpy(where, (*ops)->where(*out), n);
	return rc;
}
