/*
 * heapstat: glibc's own view of a process's heap, every 5 s, without rebuilding the process.
 *
 *   gcc -O2 -shared -fPIC -o /tmp/heapstat.so benches/heapstat.c -lpthread
 *   LD_PRELOAD=/tmp/heapstat.so HEAPSTAT_OUT=/tmp/heap.log target/release/wiregate --config ...
 *
 * Each line: unix time, then mallinfo2()'s arena (bytes the arenas took from the system),
 * ordblks (free chunks), uord (bytes in use), ford (bytes free inside the arenas). A leak
 * grows `uord`; fragmentation grows `arena`, `ford` and `ordblks` with `uord` flat. Child
 * processes inherit LD_PRELOAD and write their own (small) lines: the gateway's are the large
 * ones. Used for benches/SOAK.md ("The slower growth").
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void *run(void *arg) {
  const char *path = arg;
  for (;;) {
    sleep(5);
    struct mallinfo2 m = mallinfo2();
    FILE *f = fopen(path, "a");
    if (!f) continue;
    fprintf(f, "%ld arena=%zu ordblks=%zu uord=%zu ford=%zu\n", (long)time(NULL), m.arena,
            m.ordblks, m.uordblks, m.fordblks);
    fclose(f);
  }
  return NULL;
}

__attribute__((constructor)) static void start(void) {
  char *path = getenv("HEAPSTAT_OUT");
  if (!path) return;
  pthread_t t;
  if (pthread_create(&t, NULL, run, path) == 0) pthread_detach(t);
}
