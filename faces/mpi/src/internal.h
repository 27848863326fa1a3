/*
 * internal.h: what the MPI face's sources share: the library's state (the
 * memwire endpoint), the objects behind the standard ABI's handles
 * (communicators, groups, datatypes, operations, error handlers, requests),
 * the mapping between handles and objects, and the error path every call
 * takes. Uses memwire's public C API only.
 *
 * Every MPI function is written as PMPI_X; the build makes MPI_X a weak
 * alias of it (the profiling interface), and generates the functions this
 * face does not implement (gen/unsupported.py).
 */
#ifndef MWMPI_INTERNAL_H
#define MWMPI_INTERNAL_H

#include <memwire.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mpi.h"

/* Every object behind a handle starts with this: `magic` tells its kind (a
 * stale or foreign pointer is caught as an invalid handle, not followed),
 * `id` is its integer handle (MPI_X_toint) while it lives. */
struct mwmpi_obj {
    uint32_t magic;
    int id;
};

enum {
    MWMPI_MAGIC_COMM = 0x4d50c033,
    MWMPI_MAGIC_GROUP = 0x4d506790,
    MWMPI_MAGIC_TYPE = 0x4d507e9e,
    MWMPI_MAGIC_OP = 0x4d5000b5,
    MWMPI_MAGIC_ERRH = 0x4d50e44a,
    MWMPI_MAGIC_REQ = 0x4d50e9e0,
    MWMPI_MAGIC_INFO = 0x4d50196f,
    MWMPI_MAGIC_MSG = 0x4d505e50,
    MWMPI_MAGIC_DEAD = 0x4d50dead,
};

/* Predefined handles are small integers below this; objects are addresses. */
#define MWMPI_PREDEFINED_LIMIT 0x1000u
/* User objects' integer handles (toint) start here. */
#define MWMPI_ID_BASE 0x10000

/* ---- error handlers -------------------------------------------------- */

struct mwmpi_errh {
    struct mwmpi_obj obj;
    MPI_Errhandler handle; /* a predefined value, or the object's address */
    MPI_Comm_errhandler_function *comm_fn; /* user handler, or NULL */
    int refs;
};

/* ---- info objects and attributes (info.c, attr.c) -------------------- */

struct mwmpi_info {
    struct mwmpi_obj obj;
    int n, cap;
    char **keys, **values; /* in the order set */
};

/* One attribute on an object: keyval and value, in the order set. */
struct mwmpi_attr {
    int keyval;
    void *value;
    struct mwmpi_attr *next;
};

struct mwmpi_info *mwmpi_info_of(MPI_Info h);
struct mwmpi_info *mwmpi_info_new(void);
void mwmpi_info_release(struct mwmpi_info *info);
int mwmpi_info_put(struct mwmpi_info *info, const char *key, const char *value);
/* A new info object with `from`'s pairs (none when `from` is NULL). */
int mwmpi_info_copy(const struct mwmpi_info *from, struct mwmpi_info **out);
/* Runs every delete callback of `list` (on `handle`, the object's handle)
 * and empties it; stops at a callback's error and returns it. */
int mwmpi_attrs_delete_all(struct mwmpi_attr **list, void *handle);
/* The copy callbacks of `from`'s attributes, into `to` (Comm_dup, Type_dup). */
int mwmpi_attrs_copy(struct mwmpi_attr *from, void *old_handle, struct mwmpi_attr **to, void *new_handle);
struct mwmpi_comm;
/* A user attribute of `c`: MPI_ERR_KEYVAL when `keyval` is not a live one. */
int mwmpi_comm_user_attr(struct mwmpi_comm *c, int keyval, void *attribute_val, int *flag);

/* ---- groups and communicators ---------------------------------------- */

struct mwmpi_group {
    struct mwmpi_obj obj;
    int size;
    int rank; /* of this process, or MPI_UNDEFINED */
    int *world; /* world rank of each member */
    int refs;
};

struct mwmpi_comm {
    struct mwmpi_obj obj;
    MPI_Comm handle;
    int rank, size;
    int *world; /* world rank of each member, in comm order */
    /* Comm rank of each world rank, or -1: a received message's source. */
    int *from_world;
    /* memwire matching context of point-to-point messages; `ctx + 1` carries
     * the face's own collective traffic, so neither sees the other. */
    uint32_t ctx;
    /* memwire team for collectives: NULL is the whole job (COMM_WORLD);
     * communicators of one member have none and do their collectives here. */
    mw_team *team;
    struct mwmpi_errh *errh;
    struct mwmpi_info *info; /* hints set (Comm_set_info), or NULL */
    struct mwmpi_attr *attrs;
    uint32_t nbc_seq; /* collectives started on it (nbc.c's tags) */
    char name[MPI_MAX_OBJECT_NAME];
    bool predefined;
};

/* ---- datatypes ------------------------------------------------------- */

/* Element kinds the reduction kernels know (op.c). */
enum mwmpi_kind {
    K_NONE = 0,
    K_I8, K_U8, K_I16, K_U16, K_I32, K_U32, K_I64, K_U64,
    K_F32, K_F64, K_LDBL,
    K_C32, K_C64, K_CLDBL, /* complex float, double, long double */
    K_BOOL, /* C _Bool */
    K_LOG4, /* Fortran LOGICAL (4 bytes, nonzero is true) */
    K_BYTE,
    /* value-index pairs of MINLOC/MAXLOC */
    K_FLOAT_INT, K_DOUBLE_INT, K_LONG_INT, K_2INT, K_SHORT_INT, K_LDBL_INT,
    K_COUNT_
};

/* A contiguous run of bytes within one element of a type. */
struct mwmpi_block {
    MPI_Aint off;
    size_t len;
};

struct mwmpi_type {
    struct mwmpi_obj obj;
    MPI_Datatype handle;
    size_t size; /* data bytes of one element */
    MPI_Aint lb, extent; /* the type's bounds (resizable) */
    MPI_Aint true_lb, true_extent; /* where the data really lies */
    /* The element's data, in type-map order, adjacent runs merged. */
    struct mwmpi_block *blocks;
    size_t nblocks;
    /* Reduction element kind and how many of it one element holds, when
     * every basic element is of one kind (K_NONE otherwise). */
    enum mwmpi_kind kind;
    size_t kind_count;
    int combiner;
    /* The constructor's arguments (contents.c), NULL for predefined types. */
    struct mwmpi_contents *contents;
    struct mwmpi_attr *attrs;
    bool predefined, committed;
    int refs;
    char name[MPI_MAX_OBJECT_NAME];
};

struct mwmpi_contents;
/* Records a new type's constructor arguments: arrays of ni ints, na
 * addresses, nc large counts and nd types for the caller to fill (types
 * through mwmpi_contents_type, which keeps them alive). NULL when out of
 * memory (the type then answers an empty envelope). */
struct mwmpi_contents {
    int ni, na, nc, nd;
    int *ints;
    MPI_Aint *aints;
    MPI_Count *counts;
    struct mwmpi_type **types;
};
struct mwmpi_contents *mwmpi_contents_new(MPI_Datatype h, int ni, int na, int nc, int nd);
void mwmpi_contents_type(struct mwmpi_contents *c, int i, MPI_Datatype h);
void mwmpi_contents_free(struct mwmpi_contents *c);

/* ---- operations ------------------------------------------------------ */

struct mwmpi_op {
    struct mwmpi_obj obj;
    MPI_Op handle;
    MPI_User_function *user; /* NULL for a predefined operation */
    bool commutative;
};

/* ---- requests -------------------------------------------------------- */

enum mwmpi_req_kind { REQ_SEND, REQ_RECV, REQ_DONE, REQ_COLL };

/* A nonblocking collective in flight (nbc.c): its messages, the memory
 * and types it holds, and what it does once they have all completed.
 * Each collective extends it (its struct starts with this one). */
struct mwmpi_nbc {
    struct mwmpi_comm *comm;
    uint64_t tag;
    mw_handle **handles;
    int nhandles, handles_cap, ncomplete;
    void **allocs;
    int nallocs, allocs_cap;
    struct mwmpi_type **types;
    int ntypes, types_cap;
    int (*finish)(struct mwmpi_nbc *b);
    int error;
    bool done;
};

/* A collective of `size` bytes (its struct) on `c`, with the next tag. */
struct mwmpi_nbc *mwmpi_nbc_new(struct mwmpi_comm *c, size_t size);
/* Memory freed with the collective. */
void *mwmpi_nbc_alloc(struct mwmpi_nbc *b, size_t len);
/* Keeps a datatype alive until the collective is freed (false: no memory). */
bool mwmpi_nbc_keep_type(struct mwmpi_nbc *b, struct mwmpi_type *t);
/* Posts a message of the collective to / from comm rank `peer`. */
int mwmpi_nbc_send(struct mwmpi_nbc *b, int dest, const void *data, size_t len);
int mwmpi_nbc_recv(struct mwmpi_nbc *b, int source, void *data, size_t len);
/* Progress: true once every message completed and `finish` ran. */
bool mwmpi_nbc_test(struct mwmpi_nbc *b);
/* Until done; the collective's error class. */
int mwmpi_nbc_wait(struct mwmpi_nbc *b);
void mwmpi_nbc_free(struct mwmpi_nbc *b);
/* After posting (err: how that went): a request owning `b` (nonblocking
 * forms), or waiting for it and freeing it (blocking forms). */
int mwmpi_nbc_start(struct mwmpi_nbc *b, int err, MPI_Request *request, const char *routine);
int mwmpi_nbc_run(struct mwmpi_nbc *b, int err, const char *routine);

struct mwmpi_req {
    struct mwmpi_obj obj;
    enum mwmpi_req_kind kind;
    mw_handle *mw; /* the memwire operation in flight, or NULL */
    struct mwmpi_comm *comm;
    /* A non-contiguous receive lands packed in `staging`, then is unpacked
     * into (buf, count, type); a non-contiguous send was packed there. */
    void *staging;
    void *buf;
    MPI_Count count;
    struct mwmpi_type *type;
    MPI_Status status; /* once complete */
    bool complete;
    int error; /* the operation's result, once complete */
    /* Persistent requests: each Start begins `inner`, a nonblocking
     * request of the operation recorded here. */
    bool persistent;
    struct mwmpi_req *inner; /* NULL while inactive */
    int mode; /* MWMPI_PERSIST_* */
    const void *p_buf;
    MPI_Count p_count;
    MPI_Datatype p_type;
    int peer, tag;
    /* Freed by the program while still active: completed in the background. */
    struct mwmpi_req *next_detached;
    struct mwmpi_nbc *nbc; /* REQ_COLL: the collective */
    size_t bsend_charge; /* a buffered send's share of the attached buffer */
};

enum { MWMPI_PERSIST_SEND, MWMPI_PERSIST_SSEND, MWMPI_PERSIST_BSEND, MWMPI_PERSIST_RECV };

/* ---- library state --------------------------------------------------- */

struct mwmpi_state {
    mw_endpoint *ep;
    int world_rank, world_size;
    int initialized; /* 1 between Init and Finalize */
    int finalized;
    int thread_level;
    unsigned long main_thread;
    /* The next communicator id this process has not used (ids are agreed
     * as the maximum over the members, so they never clash locally). */
    uint32_t next_comm_id;
    char processor_name[MPI_MAX_PROCESSOR_NAME];
};

extern struct mwmpi_state mwmpi;
extern struct mwmpi_comm mwmpi_comm_world, mwmpi_comm_self;

/* memwire contexts of the face: communicator id `id` uses base + 2 id. */
#define MWMPI_CTX_BASE 0x4d500000u
/* Active message that ends the job (MPI_Abort), one way to every rank. */
#define MWMPI_AM_ABORT 0x4d50

/* ---- errors (errors.c) ----------------------------------------------- */

/* Raises `code` on `comm` (NULL: no object, MPI_COMM_SELF's handler):
 * FATAL and ABORT print `routine` and the reason and end the job, a user
 * handler is called; returns `code` for the routine to return. `detail`
 * may be NULL; it is printed by the fatal handlers. */
int mwmpi_raise(struct mwmpi_comm *comm, int code, const char *routine, const char *detail, ...)
    __attribute__((format(printf, 4, 5)));
/* The MPI error class of a memwire status. */
int mwmpi_class_of(mw_status status);
/* `mwmpi_raise` for a failed memwire call, with memwire's reason. */
int mwmpi_raise_mw(struct mwmpi_comm *comm, mw_status status, const char *routine);
void mwmpi_errh_retain(struct mwmpi_errh *e);
void mwmpi_errh_release(struct mwmpi_errh *e);
struct mwmpi_errh *mwmpi_errh_of(MPI_Errhandler h);
extern struct mwmpi_errh mwmpi_errors_are_fatal, mwmpi_errors_return;

/* Checks shared by every routine: returns an error code, or MPI_SUCCESS. */
#define MWMPI_REQUIRE_INIT(routine)                                                                   \
    do {                                                                                              \
        if (!mwmpi.initialized)                                                                       \
            return mwmpi_raise(NULL, MPI_ERR_OTHER, routine, "called before MPI_Init or after MPI_Finalize"); \
    } while (0)

/* ---- handles (handles.c) --------------------------------------------- */

/* Gives `obj` an integer handle; frees it again. */
void mwmpi_obj_register(struct mwmpi_obj *obj, uint32_t magic);
void mwmpi_obj_unregister(struct mwmpi_obj *obj);

/* Calls fn on every live user object (Finalize). */
void mwmpi_objs_each(void (*fn)(struct mwmpi_obj *obj));

/* The object behind a handle, or NULL when the handle is invalid (or null). */
struct mwmpi_comm *mwmpi_comm_of(MPI_Comm h);
struct mwmpi_group *mwmpi_group_of(MPI_Group h);
struct mwmpi_type *mwmpi_type_of(MPI_Datatype h);
struct mwmpi_op *mwmpi_op_of(MPI_Op h);
struct mwmpi_req *mwmpi_req_of(MPI_Request h);

/* Fetches the communicator or returns MPI_ERR_COMM from the calling routine. */
#define MWMPI_COMM(var, h, routine)                                                               \
    struct mwmpi_comm *var = mwmpi_comm_of(h);                                                    \
    if (var == NULL) return mwmpi_raise(NULL, MPI_ERR_COMM, routine, "invalid communicator")

/* ---- communicators and groups (comm.c, group.c) ----------------------- */

void mwmpi_comms_init(void);
void mwmpi_comms_fini(void);
/* Finalize's first step: the attributes of COMM_SELF, then COMM_WORLD. */
int mwmpi_comms_delete_attrs(void);
struct mwmpi_group *mwmpi_group_new(int size, const int *world);
extern struct mwmpi_group mwmpi_group_empty;
void mwmpi_group_release(struct mwmpi_group *g);

/* ---- datatypes (datatype.c) ------------------------------------------ */

void mwmpi_types_init(void);
/* Checks a datatype argument for communication: valid and committed. */
int mwmpi_type_check(struct mwmpi_comm *comm, MPI_Datatype h, const char *routine, struct mwmpi_type **out);
/* Whether `count` elements of `t` at `buf` are one contiguous run of bytes
 * (then at buf + t->true_lb). */
bool mwmpi_type_contiguous(const struct mwmpi_type *t, MPI_Count count);
void mwmpi_pack(const struct mwmpi_type *t, MPI_Count count, const void *buf, void *out);
void mwmpi_unpack(const struct mwmpi_type *t, MPI_Count count, const void *in, size_t in_len, void *buf);
void mwmpi_type_release(struct mwmpi_type *t);

/* ---- point-to-point (p2p.c, request.c) ------------------------------- */

/* A message's memwire tag: the MPI tag, or MW_ANY_TAG for MPI_ANY_TAG. */
static inline uint64_t mwmpi_tag(int tag) { return tag == MPI_ANY_TAG ? MW_ANY_TAG : (uint64_t)(uint32_t)tag; }
/* Fills `status` (unless ignored) from a received message's envelope. */
void mwmpi_status_set(MPI_Status *status, const struct mwmpi_comm *comm, const mw_recv_status *env, int error);
void mwmpi_status_empty(MPI_Status *status);
void mwmpi_status_set_count(MPI_Status *status, MPI_Count bytes);
MPI_Count mwmpi_status_count(const MPI_Status *status);
/* The request object for a new operation. */
struct mwmpi_req *mwmpi_req_new(enum mwmpi_req_kind kind, struct mwmpi_comm *comm);
void mwmpi_req_free(struct mwmpi_req *r);
/* Completes the requests the program freed while active (Finalize). */
void mwmpi_requests_fini(void);
/* Puts an active request on the list completed in the background. */
void mwmpi_req_detach(struct mwmpi_req *r);
/* Completes what of that list is done. */
void mwmpi_requests_sweep(void);
/* Gives a finished buffered send's bytes back to the attached buffer. */
void mwmpi_bsend_release(size_t bytes);
/* Waits politely: progress memwire, then give the CPU away after a while. */
void mwmpi_poll(unsigned *spins);

/* Internal point-to-point on a communicator's collective context. */
int mwmpi_coll_send(struct mwmpi_comm *c, int dest, int tag, const void *buf, size_t len);
int mwmpi_coll_recv(struct mwmpi_comm *c, int source, int tag, void *buf, size_t len);

/* ---- reductions (op.c) ----------------------------------------------- */

void mwmpi_ops_init(void);
/* Checks that `op` applies to `t`: MPI_SUCCESS or MPI_ERR_OP. */
int mwmpi_op_check(const struct mwmpi_op *op, const struct mwmpi_type *t);
/* inout = in op inout for `count` elements of `t` whose basic elements lie
 * as in a contiguous layout (predefined and contiguous types; value-index
 * pairs `extent` apart); a user operation gets the buffers as they are. */
void mwmpi_op_apply(const struct mwmpi_op *op, const struct mwmpi_type *t, const void *in, void *inout, MPI_Count count);
/* memwire's dtype/op for a reduction it can do itself, or false. */
/* Bytes `count` elements of `t` span from their true lower bound. */
size_t mwmpi_span(const struct mwmpi_type *t, MPI_Count count);
/* inout = in op inout on user-layout buffers (reduce.c). */
void mwmpi_combine(const struct mwmpi_op *op, const struct mwmpi_type *t, MPI_Count count, const void *in, void *inout);
bool mwmpi_op_native(const struct mwmpi_op *op, const struct mwmpi_type *t, mw_dtype *dtype, mw_op *mop);

#endif /* MWMPI_INTERNAL_H */
