/* Fuzz target: the mountinfo reader of folders/fsquota (fsq_mount_source),
 * which finds the block device of a storage host for quotactl(2). The
 * input is the file's text (cut at the first NUL, as a C string is). The
 * target aborts on a result outside the contract: an unknown error, a
 * source that is not NUL-terminated within its buffer, or one that is not
 * a word of the input. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "folders/fsquota.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	static const unsigned devs[][2] = {{7, 0}, {8, 1}, {253, 3}, {0, 0}, {4095, 1048575}};
	static const size_t sizes[] = {1, 8, 64, 1024};
	for (size_t d = 0; d < sizeof(devs) / sizeof(devs[0]); d++) {
		for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
			char src[1024 + 1];
			memset(src, 'Z', sizeof(src));
			int r = fsq_mount_source(text, devs[d][0], devs[d][1], src, sizes[z]);
			if (r != 0 && r != -ENOENT && r != -EINVAL && r != -ENAMETOOLONG)
				abort();
			if (r != 0)
				continue;
			if (!memchr(src, '\0', sizes[z]) || !src[0] || !strstr(text, src))
				abort();
		}
	}
	free(text);
	return 0;
}
