/* Mock CUDA driver: device memory that is not stream-ordered. Linear
 * allocations (current and pre-3.2 entry points, pitched, managed) and the
 * table that tracks every allocation for its free, virtual memory
 * management (handles, address ranges, mappings), arrays, and
 * cuMemGetInfo. See mock_cuda.c for what the mock simulates. */
#include <stdlib.h>

#include "gpu/mock/mock_cuda.h"

/* Arrays are tracked (MA_ARRAY, keyed by their address) so that their
 * context's end frees them; the handle then stays with magic 0, so a
 * later destroy of it is refused rather than a use after free. */
struct CUarray_st {
	unsigned magic;
};

struct CUmipmappedArray_st {
	unsigned magic;
};

/* A cuMemMap mapping. */
struct mock_map {
	uint64_t va, size;
	CUmemGenericAllocationHandle handle;
};

uint64_t mock_next_ptr[MOCK_MAX_DEVICES];
static uint32_t mock_next_ptr_v1 = 0x10000000U;
static uint64_t mock_next_handle = 1;
struct mock_alloc *mock_allocs;
size_t mock_nallocs;
static size_t mock_cap_allocs;
static struct mock_map *mock_maps;
static size_t mock_nmaps, mock_cap_maps;
struct mock_range *mock_vas;
size_t mock_nvas;
static size_t mock_cap_vas;
static uint64_t mock_next_va = MOCK_VA_BASE;

/* ---- memory ------------------------------------------------------------ */

/* Makes room for one more element in a growing table (*arr holding n of
 * *cap elements of size elem). */
bool mock_room(void **arr, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return true;
	size_t c = *cap ? *cap * 2 : 64;
	void *a = realloc(*arr, c * elem);
	if (!a)
		return false;
	*arr = a;
	*cap = c;
	return true;
}

/* Records an allocation; the new entry is mock_allocs[mock_nallocs - 1]. */
CUresult mock_track(int kind, int dev, uint64_t key, int64_t bytes)
{
	if (!mock_room((void **)&mock_allocs, &mock_cap_allocs, mock_nallocs, sizeof(*mock_allocs)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	mock_allocs[mock_nallocs++] = (struct mock_alloc){ .kind = kind, .dev = dev,
		.key = key, .bytes = bytes };
	return CUDA_SUCCESS;
}

/* Takes bytes from dev and records the allocation under key, owned by
 * the current context where the kind has an owner. */
static CUresult mock_take(int kind, int dev, uint64_t key, int64_t bytes)
{
	if (mock_usage_add(dev, bytes) < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult rc = mock_track(kind, dev, key, bytes);
	if (rc != CUDA_SUCCESS)
		mock_usage_add(dev, -bytes);
	else if (kind == MA_PTR || kind == MA_PTR_V1 || kind == MA_ARRAY)
		mock_allocs[mock_nallocs - 1].ctx = mock_current();
	return rc;
}

void mock_ctx_free_allocs(CUcontext c)
{
	for (size_t i = mock_nallocs; i-- > 0;) {
		struct mock_alloc *a = &mock_allocs[i];
		if (a->ctx != c ||
		    (a->kind != MA_PTR && a->kind != MA_PTR_V1 && a->kind != MA_ARRAY))
			continue;
		if (a->kind == MA_ARRAY)
			((struct CUarray_st *)(uintptr_t)a->key)->magic = 0;
		mock_usage_add(a->dev, -a->bytes);
		mock_untrack(a);
	}
}

/* The tracked allocation, valid until the table next changes. */
struct mock_alloc *mock_find(int kind, uint64_t key)
{
	for (size_t i = mock_nallocs; i-- > 0;)
		if (mock_allocs[i].kind == kind && mock_allocs[i].key == key)
			return &mock_allocs[i];
	return NULL;
}

void mock_untrack(struct mock_alloc *a)
{
	*a = mock_allocs[--mock_nallocs];
}

CUresult mock_give(int kind, uint64_t key)
{
	struct mock_alloc *a = mock_find(kind, key);
	if (!a)
		return CUDA_ERROR_INVALID_VALUE;
	mock_usage_add(a->dev, -a->bytes);
	mock_untrack(a);
	return CUDA_SUCCESS;
}

static CUresult mock_alloc_on(CUdeviceptr *dptr, size_t bytes, int dev)
{
	REQUIRE_INIT();
	if (!dptr || bytes == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (bytes > (size_t)INT64_MAX)
		return CUDA_ERROR_OUT_OF_MEMORY;
	uint64_t p = mock_next_ptr[dev];
	CUresult rc = mock_take(MA_PTR, dev, p, (int64_t)bytes);
	if (rc != CUDA_SUCCESS)
		return rc;
	mock_next_ptr[dev] += ((uint64_t)bytes + 511) & ~511ULL;
	*dptr = p;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
	return LOCKED(mock_alloc_on(dptr, bytes, mock_current_dev()));
}

static CUresult mock_alloc_v1(CUdeviceptr_v1 *dptr, unsigned int bytes)
{
	REQUIRE_INIT();
	if (!dptr || bytes == 0)
		return CUDA_ERROR_INVALID_VALUE;
	int dev = mock_current_dev();
	if (dev < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	uint32_t p = mock_next_ptr_v1;
	if ((uint64_t)p + bytes > 0xffffffffULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult rc = mock_take(MA_PTR_V1, dev, p, bytes);
	if (rc != CUDA_SUCCESS)
		return rc;
	mock_next_ptr_v1 += (bytes + 511u) & ~511u;
	*dptr = p;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytes)
{
	return LOCKED(mock_alloc_v1(dptr, bytes));
}

MOCK_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
				     size_t height, unsigned int elem)
{
	if (!pitch || width == 0 || height == 0 ||
	    (elem != 4 && elem != 8 && elem != 16))
		return CUDA_ERROR_INVALID_VALUE;
	size_t p = (width + 511) & ~(size_t)511;
	if (height > SIZE_MAX / p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult rc = cuMemAlloc_v2(dptr, p * height);
	if (rc == CUDA_SUCCESS)
		*pitch = p;
	return rc;
}

MOCK_API CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch,
				  unsigned int width, unsigned int height, unsigned int elem)
{
	if (!pitch || width == 0 || height == 0 ||
	    (elem != 4 && elem != 8 && elem != 16))
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t p = ((uint64_t)width + 511) & ~511ULL;
	if (p * height > 0xffffffffULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult rc = cuMemAlloc(dptr, (unsigned int)(p * height));
	if (rc == CUDA_SUCCESS)
		*pitch = (unsigned int)p;
	return rc;
}

MOCK_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags)
{
	if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
		return CUDA_ERROR_INVALID_VALUE;
	return cuMemAlloc_v2(dptr, bytes);
}

/* ---- virtual memory management ----------------------------------------- */

static CUresult mock_mem_create(CUmemGenericAllocationHandle *h, size_t size,
				const CUmemAllocationProp *prop)
{
	REQUIRE_INIT();
	if (!h || !prop || size == 0 || size > (size_t)INT64_MAX ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_valid_dev(prop->location.id))
		return CUDA_ERROR_INVALID_DEVICE;
	uint64_t key = mock_next_handle;
	CUresult rc = mock_take(MA_HANDLE, prop->location.id, key, (int64_t)size);
	if (rc == CUDA_SUCCESS) {
		mock_allocs[mock_nallocs - 1].refs = 1;
		mock_next_handle++;
		*h = key;
	}
	return rc;
}

MOCK_API CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
			      const CUmemAllocationProp *prop, unsigned long long flags)
{
	if (flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	return LOCKED(mock_mem_create(h, size, prop));
}

/* The physical memory of a handle lives while anything holds it: a
 * reference (cuMemCreate, cuMemRetainAllocationHandle) or a mapping. */
static void mock_handle_put(struct mock_alloc *a)
{
	if (a->refs == 0 && a->maps == 0) {
		mock_usage_add(a->dev, -a->bytes);
		mock_untrack(a);
	}
}

static CUresult mock_mem_release(CUmemGenericAllocationHandle h)
{
	REQUIRE_INIT();
	struct mock_alloc *a = mock_find(MA_HANDLE, h);
	if (!a || a->refs == 0)
		return CUDA_ERROR_INVALID_VALUE;
	a->refs--;
	mock_handle_put(a);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	return LOCKED(mock_mem_release(h));
}

static bool mock_overlaps(uint64_t a, uint64_t an, uint64_t b, uint64_t bn)
{
	return a < b + bn && b < a + an;
}

static bool mock_va_is_free(uint64_t base, uint64_t size)
{
	for (size_t i = 0; i < mock_nvas; i++)
		if (mock_overlaps(base, size, mock_vas[i].base, mock_vas[i].size))
			return false;
	return true;
}

/* addr is a hint, taken when it is free, aligned and in the mock's
 * address area; otherwise the range comes after every range handed out
 * so far (freed ranges are not reused, the area is 16 TiB). */
CUresult mock_address_reserve(CUdeviceptr *ptr, size_t size, size_t align,
				     CUdeviceptr addr)
{
	REQUIRE_INIT();
	if (!ptr || size == 0 || (align & (align - 1)) != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (align < MOCK_POOL_GRAIN)
		align = MOCK_POOL_GRAIN;   /* the mock's allocation granularity */
	if (size > MOCK_VA_END - MOCK_VA_BASE)
		return CUDA_ERROR_OUT_OF_MEMORY;
	uint64_t base;
	if (addr != 0 && addr % align == 0 && addr >= MOCK_VA_BASE &&
	    addr <= MOCK_VA_END - size && mock_va_is_free(addr, size)) {
		base = addr;
	} else {
		base = (mock_next_va + align - 1) & ~(uint64_t)(align - 1);
		if (base < mock_next_va || base > MOCK_VA_END - size)
			return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (!mock_room((void **)&mock_vas, &mock_cap_vas, mock_nvas, sizeof(*mock_vas)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	mock_vas[mock_nvas++] = (struct mock_range){ .base = base, .size = size };
	if (base + size > mock_next_va)
		mock_next_va = base + size;
	*ptr = base;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
				      CUdeviceptr addr, unsigned long long flags)
{
	if (flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	return LOCKED(mock_address_reserve(ptr, size, alignment, addr));
}

/* Only a whole range as reserved can be freed. */
static CUresult mock_address_free(CUdeviceptr ptr, size_t size)
{
	REQUIRE_INIT();
	for (size_t i = 0; i < mock_nvas; i++)
		if (mock_vas[i].base == ptr && mock_vas[i].size == size && !mock_vas[i].graph) {
			mock_vas[i] = mock_vas[--mock_nvas];
			return CUDA_SUCCESS;
		}
	return CUDA_ERROR_INVALID_VALUE;
}

MOCK_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	return LOCKED(mock_address_free(ptr, size));
}

static CUresult mock_mem_map(CUdeviceptr va, size_t size, size_t offset,
			     CUmemGenericAllocationHandle h)
{
	REQUIRE_INIT();
	struct mock_alloc *a = mock_find(MA_HANDLE, h);
	/* a released handle is dead to its user even while still mapped */
	if (!a || a->refs == 0 || va == 0 || size == 0 || va + size < va ||
	    offset > (uint64_t)a->bytes || size > (uint64_t)a->bytes - offset)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < mock_nmaps; i++)
		if (mock_overlaps(va, size, mock_maps[i].va, mock_maps[i].size))
			return CUDA_ERROR_INVALID_VALUE;
	if (!mock_room((void **)&mock_maps, &mock_cap_maps, mock_nmaps, sizeof(*mock_maps)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	mock_maps[mock_nmaps++] = (struct mock_map){ .va = va, .size = size, .handle = h };
	a->maps++;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			   CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	if (flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	return LOCKED(mock_mem_map(ptr, size, offset, handle));
}

/* Checks the whole request before removing anything, so that a refused
 * unmap changes nothing. */
static CUresult mock_mem_unmap(CUdeviceptr va, size_t size)
{
	REQUIRE_INIT();
	if (va == 0 || size == 0 || va + size < va)
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t end = va + size;
	bool at_start = false;
	for (size_t i = 0; i < mock_nmaps; i++) {
		const struct mock_map *m = &mock_maps[i];
		if (m->va < va || m->va >= end)
			continue;
		if (m->size > end - m->va)
			return CUDA_ERROR_INVALID_VALUE;
		at_start |= m->va == va;
	}
	if (!at_start)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = mock_nmaps; i-- > 0;) {
		if (mock_maps[i].va < va || mock_maps[i].va >= end)
			continue;
		struct mock_alloc *a = mock_find(MA_HANDLE, mock_maps[i].handle);
		mock_maps[i] = mock_maps[--mock_nmaps];
		if (a) {
			a->maps--;
			mock_handle_put(a);
		}
	}
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	return LOCKED(mock_mem_unmap(ptr, size));
}

static CUresult mock_retain_handle(CUmemGenericAllocationHandle *h, void *addr)
{
	REQUIRE_INIT();
	if (!h)
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t va = (uint64_t)(uintptr_t)addr;
	for (size_t i = 0; i < mock_nmaps; i++) {
		const struct mock_map *m = &mock_maps[i];
		if (va < m->va || va - m->va >= m->size)
			continue;
		struct mock_alloc *a = mock_find(MA_HANDLE, m->handle);
		if (!a)
			break;
		a->refs++;
		*h = m->handle;
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_INVALID_VALUE;
}

MOCK_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle,
					      void *addr)
{
	return LOCKED(mock_retain_handle(handle, addr));
}

/* ---- arrays ------------------------------------------------------------ */

static int64_t mock_format_bytes(CUarray_format f)
{
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
	case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF: return 2;
	case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT: return 4;
	default: return -1;
	}
}

static int64_t mock_extent_bytes(size_t w, size_t h, size_t d, CUarray_format f,
				 unsigned ch, unsigned levels)
{
	int64_t bpe = mock_format_bytes(f);
	if (bpe < 0 || w == 0 || (ch != 1 && ch != 2 && ch != 4) || levels == 0)
		return -1;
	int64_t total = 0;
	for (unsigned l = 0; l < levels; l++) {
		size_t lw = w >> l ? w >> l : 1, lh = h >> l ? h >> l : 1,
		       ld = d >> l ? d >> l : 1;
		int64_t b;
		if (__builtin_mul_overflow((int64_t)lw, (int64_t)lh, &b) ||
		    __builtin_mul_overflow(b, (int64_t)ld, &b) ||
		    __builtin_mul_overflow(b, bpe * ch, &b) ||
		    __builtin_add_overflow(total, b, &total))
			return INT64_MAX;
	}
	return total;
}

static CUresult mock_array_new(CUarray *pa, int64_t bytes)
{
	REQUIRE_INIT();
	if (bytes < 0)
		return CUDA_ERROR_INVALID_VALUE;
	int dev = mock_current_dev();
	if (dev < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	CUarray a = calloc(1, sizeof(*a));
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult rc = mock_take(MA_ARRAY, dev, (uintptr_t)a, bytes);
	if (rc != CUDA_SUCCESS) {
		free(a);
		return rc;
	}
	a->magic = MOCK_MAGIC_ARRAY;
	*pa = a;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuArrayCreate_v2(CUarray *pa, const CUDA_ARRAY_DESCRIPTOR *d)
{
	if (!pa || !d)
		return CUDA_ERROR_INVALID_VALUE;
	int64_t b = mock_extent_bytes(d->Width, d->Height, 1, d->Format, d->NumChannels, 1);
	return LOCKED(mock_array_new(pa, b));
}

MOCK_API CUresult cuArray3DCreate_v2(CUarray *pa, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	if (!pa || !d)
		return CUDA_ERROR_INVALID_VALUE;
	int64_t b = mock_extent_bytes(d->Width, d->Height, d->Depth, d->Format,
				      d->NumChannels, 1);
	return LOCKED(mock_array_new(pa, b));
}

/* The pre-3.2 entry points: the same arrays, described with 32-bit
 * extents. */
MOCK_API CUresult cuArrayCreate(CUarray *pa, const CUDA_ARRAY_DESCRIPTOR_v1 *d)
{
	if (!pa || !d)
		return CUDA_ERROR_INVALID_VALUE;
	int64_t b = mock_extent_bytes(d->Width, d->Height, 1, d->Format, d->NumChannels, 1);
	return LOCKED(mock_array_new(pa, b));
}

MOCK_API CUresult cuArray3DCreate(CUarray *pa, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d)
{
	if (!pa || !d)
		return CUDA_ERROR_INVALID_VALUE;
	int64_t b = mock_extent_bytes(d->Width, d->Height, d->Depth, d->Format,
				      d->NumChannels, 1);
	return LOCKED(mock_array_new(pa, b));
}

static CUresult mock_array_destroy(CUarray a)
{
	REQUIRE_INIT();
	if (!a || a->magic != MOCK_MAGIC_ARRAY)
		return CUDA_ERROR_INVALID_HANDLE;
	mock_give(MA_ARRAY, (uintptr_t)a);
	a->magic = 0;
	free(a);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuArrayDestroy(CUarray a)
{
	return LOCKED(mock_array_destroy(a));
}

static CUresult mock_mipmap_new(CUmipmappedArray *pm, const CUDA_ARRAY3D_DESCRIPTOR *d,
				unsigned levels)
{
	REQUIRE_INIT();
	int64_t b = mock_extent_bytes(d->Width, d->Height, d->Depth, d->Format,
				      d->NumChannels, levels);
	if (b < 0)
		return CUDA_ERROR_INVALID_VALUE;
	int dev = mock_current_dev();
	if (dev < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	CUmipmappedArray m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult rc = mock_take(MA_ARRAY, dev, (uintptr_t)m, b);
	if (rc != CUDA_SUCCESS) {
		free(m);
		return rc;
	}
	m->magic = MOCK_MAGIC_ARRAY;
	*pm = m;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMipmappedArrayCreate(CUmipmappedArray *pm,
					 const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned int levels)
{
	if (!pm || !d)
		return CUDA_ERROR_INVALID_VALUE;
	return LOCKED(mock_mipmap_new(pm, d, levels));
}

static CUresult mock_mipmap_destroy(CUmipmappedArray m)
{
	REQUIRE_INIT();
	if (!m || m->magic != MOCK_MAGIC_ARRAY)
		return CUDA_ERROR_INVALID_HANDLE;
	mock_give(MA_ARRAY, (uintptr_t)m);
	m->magic = 0;
	free(m);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMipmappedArrayDestroy(CUmipmappedArray m)
{
	return LOCKED(mock_mipmap_destroy(m));
}

static CUresult mock_mem_info(size_t *freep, size_t *totalp)
{
	REQUIRE_INIT();
	if (!freep || !totalp)
		return CUDA_ERROR_INVALID_VALUE;
	int dev = mock_current_dev();
	if (dev < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	int64_t total = mock_spec.dev[dev].mem, used = mock_usage_get(dev);
	*totalp = (size_t)total;
	*freep = used >= total ? 0 : (size_t)(total - used);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMemGetInfo_v2(size_t *freep, size_t *totalp)
{
	return LOCKED(mock_mem_info(freep, totalp));
}

MOCK_API CUresult cuMemGetInfo(unsigned int *freep, unsigned int *totalp)
{
	size_t f, t;
	CUresult rc = cuMemGetInfo_v2(freep ? &f : NULL, totalp ? &t : NULL);
	if (rc == CUDA_SUCCESS) {
		*freep = f > 0xffffffffu ? 0xffffffffu : (unsigned int)f;
		*totalp = t > 0xffffffffu ? 0xffffffffu : (unsigned int)t;
	}
	return rc;
}
