/* Allocation hooks: linear and managed memory, VMM, arrays, and what a
 * process is told about memory (cuMemGetInfo, cuDeviceTotalMem, NVML).
 * Every family reserves its bytes in the shared region *before* calling
 * the driver (FGPU_ALLOC in shim.h); past the share the call fails with
 * CUDA_ERROR_OUT_OF_MEMORY and the driver is never asked. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fgpu/shim.h"

/* ---- hooks: linear memory ---------------------------------------------------- */


CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
	CUDA_INIT();
	if (!fgpu_accounting() || !dptr || bytes == 0 || bytes > (size_t)INT64_MAX)
		return REAL(cuMemAlloc_v2, dptr, bytes);
	CUdevice ord;
	CUresult rc = fgpu_current_device(&ord);
	if (rc != CUDA_SUCCESS)
		return rc;
	return FGPU_ALLOC(K_PTR, ord, (int64_t)bytes, *dptr, REAL(cuMemAlloc_v2, dptr, bytes),
			  REAL(cuMemFree_v2, *dptr));
}

CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytes)
{
	CUDA_INIT();
	if (!fgpu_accounting() || !dptr || bytes == 0)
		return REAL(cuMemAlloc, dptr, bytes);
	CUdevice ord;
	CUresult rc = fgpu_current_device(&ord);
	if (rc != CUDA_SUCCESS)
		return rc;
	return FGPU_ALLOC(K_PTR_V1, ord, (int64_t)bytes, *dptr, REAL(cuMemAlloc, dptr, bytes),
			  REAL(cuMemFree, *dptr));
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags)
{
	CUDA_INIT();
	if (!fgpu_accounting() || !dptr || bytes == 0 || bytes > (size_t)INT64_MAX)
		return REAL(cuMemAllocManaged, dptr, bytes, flags);
	CUdevice ord;
	CUresult rc = fgpu_current_device(&ord);
	if (rc != CUDA_SUCCESS)
		return rc;
	return FGPU_ALLOC(K_PTR, ord, (int64_t)bytes, *dptr,
			  REAL(cuMemAllocManaged, dptr, bytes, flags), REAL(cuMemFree_v2, *dptr));
}

/* Pitch is the driver's choice; reserve a 512-byte-aligned estimate first
 * (the usual texture pitch alignment), then settle on the real size. */
static CUresult fgpu_settle(int idx, int64_t reserved, int64_t actual, bool *ok)
{
	*ok = true;
	if (actual > reserved) {
		if (fgpu_region_reserve(&fgpu_region, idx, actual - reserved, fgpu_limit(idx)) < 0)
			*ok = false;
	} else if (actual < reserved) {
		fgpu_unreserve(idx, reserved - actual);
	}
	return CUDA_SUCCESS;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
			    unsigned int elem)
{
	CUDA_INIT();
	if (!fgpu_accounting() || !dptr || !pitch || width == 0 || height == 0)
		return REAL(cuMemAllocPitch_v2, dptr, pitch, width, height, elem);
	CUdevice ord;
	CUresult rc = fgpu_current_device(&ord);
	if (rc != CUDA_SUCCESS)
		return rc;
	uint64_t est;
	if (__builtin_mul_overflow((uint64_t)((width + 511) & ~(size_t)511), (uint64_t)height, &est) ||
	    est > (uint64_t)INT64_MAX)
		return CUDA_ERROR_OUT_OF_MEMORY;
	int idx;
	if ((rc = fgpu_reserve(ord, (int64_t)est, &idx)) != CUDA_SUCCESS)
		return rc;
	rc = REAL(cuMemAllocPitch_v2, dptr, pitch, width, height, elem);
	if (rc != CUDA_SUCCESS) {
		fgpu_unreserve(idx, (int64_t)est);
		return rc;
	}
	int64_t actual = (int64_t)(*pitch * height);
	bool ok;
	fgpu_settle(idx, (int64_t)est, actual, &ok);
	if (!ok || fgpu_track(K_PTR, *dptr, idx, actual) < 0) {
		REAL(cuMemFree_v2, *dptr);
		fgpu_unreserve(idx, ok ? actual : (int64_t)est);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int width,
			 unsigned int height, unsigned int elem)
{
	CUDA_INIT();
	if (!fgpu_accounting() || !dptr || !pitch || width == 0 || height == 0)
		return REAL(cuMemAllocPitch, dptr, pitch, width, height, elem);
	CUdevice ord;
	CUresult rc = fgpu_current_device(&ord);
	if (rc != CUDA_SUCCESS)
		return rc;
	int64_t est = (int64_t)(((uint64_t)width + 511) & ~511ULL) * height;
	int idx;
	if ((rc = fgpu_reserve(ord, est, &idx)) != CUDA_SUCCESS)
		return rc;
	rc = REAL(cuMemAllocPitch, dptr, pitch, width, height, elem);
	if (rc != CUDA_SUCCESS) {
		fgpu_unreserve(idx, est);
		return rc;
	}
	int64_t actual = (int64_t)*pitch * height;
	bool ok;
	fgpu_settle(idx, est, actual, &ok);
	if (!ok || fgpu_track(K_PTR_V1, *dptr, idx, actual) < 0) {
		REAL(cuMemFree, *dptr);
		fgpu_unreserve(idx, ok ? actual : est);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

/* cuMemFree_v2 may free stream-ordered allocations too. */

CUresult cuMemFree_v2(CUdeviceptr p)
{
	CUDA_INIT();
	bool mine;
	CUresult rc = fgpu_pool_free_sync(p, &mine);
	if (mine)
		return rc;
	return FGPU_FREE(K_PTR, p, REAL(cuMemFree_v2, p));
}

CUresult cuMemFree(CUdeviceptr_v1 p)
{
	CUDA_INIT();
	return FGPU_FREE(K_PTR_V1, p, REAL(cuMemFree, p));
}

/* ---- hooks: virtual memory management ---------------------------------------- */

/* cuMemCreate takes physical memory; the driver gives it back only when
 * the handle has no references left (cuMemRelease; cuMemRetainAllocationHandle
 * adds one) *and* no mappings (cuMemMap / cuMemUnmap). The charge follows
 * that, not cuMemRelease alone. */

CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
		     const CUmemAllocationProp *prop, unsigned long long flags)
{
	CUDA_INIT();
	if (!fgpu_accounting() || !h || !prop || size == 0 || size > (size_t)INT64_MAX ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return REAL(cuMemCreate, h, size, prop, flags);   /* host memory: not ours */
	return FGPU_ALLOC(K_HANDLE, prop->location.id, (int64_t)size, *h,
			  REAL(cuMemCreate, h, size, prop, flags), REAL(cuMemRelease, *h));
}

/* Drops e when nothing holds its memory any more. Caller holds the table
 * lock; the bytes to unreserve are returned (0: still held). */
static int64_t fgpu_handle_check_locked(struct fgpu_entry *e, int *idx)
{
	if (e->refs > 0 || e->maps > 0)
		return 0;
	int64_t b = e->bytes;
	*idx = e->idx;
	fgpu_drop_locked(e);
	return b;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	CUDA_INIT();
	CUresult rc = REAL(cuMemRelease, h);
	if (rc != CUDA_SUCCESS || !fgpu_accounting())
		return rc;
	int idx = -1;
	int64_t freed = 0;
	pthread_mutex_lock(&fgpu_table_lock);
	struct fgpu_entry *e = fgpu_find_locked(K_HANDLE, h);
	if (e && e->refs > 0) {
		e->refs--;
		freed = fgpu_handle_check_locked(e, &idx);
	}
	pthread_mutex_unlock(&fgpu_table_lock);
	if (freed > 0)
		fgpu_unreserve(idx, freed);
	return rc;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *addr)
{
	CUDA_INIT();
	CUresult rc = REAL(cuMemRetainAllocationHandle, h, addr);
	if (rc != CUDA_SUCCESS || !fgpu_accounting() || !h)
		return rc;
	pthread_mutex_lock(&fgpu_table_lock);
	struct fgpu_entry *e = fgpu_find_locked(K_HANDLE, *h);
	if (e)
		e->refs++;
	pthread_mutex_unlock(&fgpu_table_lock);
	return rc;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
		  unsigned long long flags)
{
	CUDA_INIT();
	CUresult rc = REAL(cuMemMap, ptr, size, offset, h, flags);
	if (rc != CUDA_SUCCESS || !fgpu_accounting())
		return rc;
	pthread_mutex_lock(&fgpu_table_lock);
	struct fgpu_entry *e = fgpu_find_locked(K_HANDLE, h);
	pthread_mutex_unlock(&fgpu_table_lock);
	/* A handle the shim did not create (imported from another process)
	 * is charged to its owner: its mappings are not followed. */
	if (e && fgpu_track(K_MAP, ptr, 0, (int64_t)size) == 0) {
		pthread_mutex_lock(&fgpu_table_lock);
		struct fgpu_entry *m = fgpu_find_locked(K_MAP, ptr);
		e = fgpu_find_locked(K_HANDLE, h);
		if (m && e) {
			m->aux = h;
			e->maps++;
		} else if (m) {
			fgpu_drop_locked(m);   /* released meanwhile */
		}
		pthread_mutex_unlock(&fgpu_table_lock);
	}
	return rc;
}

/* Ends mapping m (caller holds the table lock); returns bytes to give back. */
static int64_t fgpu_unmap_locked(struct fgpu_entry *m, int *idx)
{
	uint64_t h = m->aux;
	fgpu_drop_locked(m);
	struct fgpu_entry *e = fgpu_find_locked(K_HANDLE, h);
	if (!e || e->maps == 0)
		return 0;
	e->maps--;
	return fgpu_handle_check_locked(e, idx);
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	CUDA_INIT();
	CUresult rc = REAL(cuMemUnmap, ptr, size);
	if (rc != CUDA_SUCCESS || !fgpu_accounting() || size == 0)
		return rc;
	/* The range covers whole mappings, usually back to back: follow them
	 * by address, and scan the table only when there is a gap. */
	CUdeviceptr end = ptr + size < ptr ? UINT64_MAX : ptr + size;
	int64_t freed[FGPU_MAX_DEVICES] = { 0 };
	pthread_mutex_lock(&fgpu_table_lock);
	CUdeviceptr at = ptr;
	while (at < end) {
		struct fgpu_entry *m = fgpu_find_locked(K_MAP, at);
		if (!m)
			break;
		CUdeviceptr next = at + (uint64_t)m->bytes;
		int idx = -1;
		int64_t b = fgpu_unmap_locked(m, &idx);
		if (b > 0 && idx >= 0 && idx < FGPU_MAX_DEVICES)
			freed[idx] += b;
		at = next;
	}
	if (at < end) {
		for (unsigned i = 0; i < FGPU_BUCKETS; i++) {
			struct fgpu_entry *m = fgpu_table[i];
			while (m) {
				if (m->kind != K_MAP || m->key < at || m->key >= end) {
					m = m->next;
					continue;
				}
				int idx = -1;
				int64_t b = fgpu_unmap_locked(m, &idx);
				if (b > 0 && idx >= 0 && idx < FGPU_MAX_DEVICES)
					freed[idx] += b;
				/* That may have dropped the handle's entry as well,
				 * maybe from this very bucket: start it over. */
				m = fgpu_table[i];
			}
		}
	}
	pthread_mutex_unlock(&fgpu_table_lock);
	for (int i = 0; i < FGPU_MAX_DEVICES; i++)
		if (freed[i] > 0)
			fgpu_unreserve(i, freed[i]);
	return rc;
}

/* ---- hooks: arrays ------------------------------------------------------------- */

static int64_t fgpu_format_bytes(CUarray_format f)
{
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
	case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF: return 2;
	case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT: return 4;
	default: return 16;   /* formats not declared here: count generously */
	}
}

/* Bytes of an array (all mip levels); INT64_MAX on overflow. */
static int64_t fgpu_array_bytes(size_t w, size_t h, size_t d, CUarray_format f,
				unsigned ch, unsigned levels)
{
	int64_t total = 0, bpe = fgpu_format_bytes(f) * (ch ? ch : 1);
	if (levels == 0)
		levels = 1;
	for (unsigned l = 0; l < levels && l < 64; l++) {
		uint64_t lw = w >> l ? w >> l : 1, lh = h >> l ? h >> l : 1, ld = d >> l ? d >> l : 1;
		int64_t b;
		if (__builtin_mul_overflow((int64_t)lw, (int64_t)lh, &b) ||
		    __builtin_mul_overflow(b, (int64_t)ld, &b) ||
		    __builtin_mul_overflow(b, bpe, &b) ||
		    __builtin_add_overflow(total, b, &total))
			return INT64_MAX;
	}
	return total;
}

/* What creating one 2D or 3D array of descriptor d returns (depth:
 * d->Depth, or 1 for 2D), an expression like FGPU_ALLOC; a macro because
 * the four descriptor types differ. */
#define FGPU_ARRAY_CREATE(fn, pa, d, depth) ({ \
	CUdevice ord_; \
	CUresult arc_; \
	if (!fgpu_accounting() || !(pa) || !(d)) { \
		arc_ = REAL(fn, pa, d); \
	} else if ((arc_ = fgpu_current_device(&ord_)) == CUDA_SUCCESS) { \
		int64_t b_ = fgpu_array_bytes((d)->Width, (d)->Height, (depth), (d)->Format, \
					      (d)->NumChannels, 1); \
		arc_ = FGPU_ALLOC(K_ARRAY, ord_, b_, (uint64_t)(uintptr_t)*(pa), REAL(fn, pa, d), \
				  REAL(cuArrayDestroy, *(pa))); \
	} \
	arc_; \
})

CUresult cuArrayCreate_v2(CUarray *pa, const CUDA_ARRAY_DESCRIPTOR *d)
{
	CUDA_INIT();
	return FGPU_ARRAY_CREATE(cuArrayCreate_v2, pa, d, 1);
}

CUresult cuArray3DCreate_v2(CUarray *pa, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	CUDA_INIT();
	return FGPU_ARRAY_CREATE(cuArray3DCreate_v2, pa, d, d->Depth);
}

/* The pre-3.2 ABI: the same arrays, described with 32-bit extents. */
CUresult cuArrayCreate(CUarray *pa, const CUDA_ARRAY_DESCRIPTOR_v1 *d)
{
	CUDA_INIT();
	return FGPU_ARRAY_CREATE(cuArrayCreate, pa, d, 1);
}

CUresult cuArray3DCreate(CUarray *pa, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d)
{
	CUDA_INIT();
	return FGPU_ARRAY_CREATE(cuArray3DCreate, pa, d, d->Depth);
}

CUresult cuArrayDestroy(CUarray a)
{
	CUDA_INIT();
	return FGPU_FREE(K_ARRAY, (uint64_t)(uintptr_t)a, REAL(cuArrayDestroy, a));
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray *pm, const CUDA_ARRAY3D_DESCRIPTOR *d,
				unsigned int levels)
{
	CUDA_INIT();
	if (!fgpu_accounting() || !pm || !d)
		return REAL(cuMipmappedArrayCreate, pm, d, levels);
	CUdevice ord;
	CUresult rc = fgpu_current_device(&ord);
	if (rc != CUDA_SUCCESS)
		return rc;
	int64_t b = fgpu_array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels,
				     levels);
	return FGPU_ALLOC(K_MIPMAP, ord, b, (uint64_t)(uintptr_t)*pm,
			  REAL(cuMipmappedArrayCreate, pm, d, levels),
			  REAL(cuMipmappedArrayDestroy, *pm));
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray m)
{
	CUDA_INIT();
	return FGPU_FREE(K_MIPMAP, (uint64_t)(uintptr_t)m, REAL(cuMipmappedArrayDestroy, m));
}

/* ---- hooks: what the process is told ----------------------------------------- */

/* The share of device idx as (total, free): total = min(limit, physical),
 * used = what the container accounted, free = total - used but never more
 * than the device really has free; never negative. */
static void fgpu_share(int idx, uint64_t phys_total, uint64_t phys_free, uint64_t *total,
		       uint64_t *used, uint64_t *freep)
{
	int64_t lim = fgpu_limit(idx);
	uint64_t t = lim == FGPU_UNLIMITED || (uint64_t)lim > phys_total ? phys_total : (uint64_t)lim;
	if (lim == FGPU_UNLIMITED) {
		*total = phys_total;
		*freep = phys_free;
		*used = phys_total - phys_free;
		return;
	}
	uint64_t u = idx >= 0 && fgpu_region.r ? (uint64_t)fgpu_region_used(&fgpu_region, idx) : 0;
	if (u > t)
		u = t;
	uint64_t f = t - u;
	if (f > phys_free)
		f = phys_free;
	*total = t;
	*used = u;
	*freep = f;
}

CUresult cuMemGetInfo_v2(size_t *freep, size_t *totalp)
{
	CUDA_INIT();
	size_t rf = 0, rt = 0;
	CUresult rc = REAL(cuMemGetInfo_v2, &rf, &rt);
	if (rc != CUDA_SUCCESS || !fgpu_active) {
		if (rc == CUDA_SUCCESS) {
			if (freep)
				*freep = rf;
			if (totalp)
				*totalp = rt;
		}
		return rc;
	}
	CUdevice ord;
	if ((rc = fgpu_current_device(&ord)) != CUDA_SUCCESS)
		return rc;
	int idx = fgpu_cuda_index(ord);
	fgpu_charge_context(idx);
	fgpu_reserves_settle();
	uint64_t t, u, f;
	fgpu_share(idx, rt, rf, &t, &u, &f);
	if (freep)
		*freep = (size_t)f;
	if (totalp)
		*totalp = (size_t)t;
	return CUDA_SUCCESS;
}

CUresult cuMemGetInfo(unsigned int *freep, unsigned int *totalp)
{
	size_t f, t;
	CUresult rc = cuMemGetInfo_v2(&f, &t);
	if (rc == CUDA_SUCCESS) {
		if (freep)
			*freep = f > 0xffffffffu ? 0xffffffffu : (unsigned int)f;
		if (totalp)
			*totalp = t > 0xffffffffu ? 0xffffffffu : (unsigned int)t;
	}
	return rc;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	CUDA_INIT();
	size_t b = 0;
	CUresult rc = REAL(cuDeviceTotalMem_v2, &b, dev);
	if (rc == CUDA_SUCCESS && fgpu_active) {
		int64_t lim = fgpu_limit(fgpu_cuda_index(dev));
		if (lim != FGPU_UNLIMITED && (uint64_t)lim < b)
			b = (size_t)lim;
	}
	if (rc == CUDA_SUCCESS) {
		if (!bytes)
			return CUDA_ERROR_INVALID_VALUE;
		*bytes = b;
	}
	return rc;
}

CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
	size_t b;
	CUresult rc = cuDeviceTotalMem_v2(&b, dev);
	if (rc == CUDA_SUCCESS) {
		if (!bytes)
			return CUDA_ERROR_INVALID_VALUE;
		*bytes = b > 0xffffffffu ? 0xffffffffu : (unsigned int)b;
	}
	return rc;
}

static int fgpu_nvml_index(nvmlDevice_t d)
{
	if (fgpu_conf_uuids) {
		char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
		if (REAL_NVML(nvmlDeviceGetUUID, d, uuid, sizeof(uuid)) != NVML_SUCCESS)
			return -1;
		return fgpu_conf_index(&fgpu_conf, uuid, -1);
	}
	unsigned int i;
	if (REAL_NVML(nvmlDeviceGetIndex, d, &i) != NVML_SUCCESS || i >= FGPU_MAX_DEVICES)
		return -1;
	return fgpu_conf_index(&fgpu_conf, NULL, (int)i);
}

/* Replaces what NVML said of device d by the share (fgpu_share). */
static void fgpu_nvml_share(nvmlDevice_t d, unsigned long long *total, unsigned long long *used,
			    unsigned long long *freep)
{
	uint64_t t, u, f;
	fgpu_reserves_settle();
	fgpu_share(fgpu_nvml_index(d), *total, *freep, &t, &u, &f);
	*total = t;
	*used = u;
	*freep = f;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
	NVML_INIT();
	if (!m)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t rc = REAL_NVML(nvmlDeviceGetMemoryInfo, d, m);
	if (rc == NVML_SUCCESS && fgpu_active)
		fgpu_nvml_share(d, &m->total, &m->used, &m->free);
	return rc;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m)
{
	NVML_INIT();
	if (!m)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t rc = REAL_NVML(nvmlDeviceGetMemoryInfo_v2, d, m);
	if (rc == NVML_SUCCESS && fgpu_active) {
		fgpu_nvml_share(d, &m->total, &m->used, &m->free);
		m->reserved = 0;
	}
	return rc;
}

