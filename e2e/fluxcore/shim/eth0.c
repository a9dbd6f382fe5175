/*
 * eth0.so: gives the process an interface named eth0 with the IPv4 address in $FLUXFED_ETH0, as
 * the first entry getifaddrs(3) returns, for fluxfed's real-Flux tests.
 *
 * A broker config that fluxfed renders binds tcp://eth0:8050, as in a pod, where eth0 is the
 * pod's interface. The tests run every broker in one network namespace that has only loopback
 * (e2e/cmd/loopback), each with a loopback address of its own standing for its pod's; libzmq
 * finds the address of an interface name with getifaddrs, so with this library preloaded
 * (LD_PRELOAD) and $FLUXFED_ETH0 set, "eth0" is that address. Nothing else changes: every other
 * interface is listed as it is, and without $FLUXFED_ETH0 the library does nothing.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct eth0 {
	struct ifaddrs ifa;
	struct sockaddr_in addr, mask;
	char name[IF_NAMESIZE];
};

/* The entries this library made, so that freeifaddrs frees them and hands the rest to libc. */
#define MAX_LIVE 256
static struct eth0 *live[MAX_LIVE];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int remember(struct eth0 *e)
{
	int ok = 0;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_LIVE; i++) {
		if (!live[i]) {
			live[i] = e;
			ok = 1;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return ok;
}

static int forget(struct ifaddrs *ifa)
{
	int found = 0;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_LIVE; i++) {
		if (live[i] && &live[i]->ifa == ifa) {
			live[i] = NULL;
			found = 1;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return found;
}

int getifaddrs(struct ifaddrs **ifap)
{
	int (*real)(struct ifaddrs **) = (int (*)(struct ifaddrs **))dlsym(RTLD_NEXT, "getifaddrs");
	int rc = real(ifap);
	const char *address = getenv("FLUXFED_ETH0");
	if (rc != 0 || !address || !*address)
		return rc;
	struct eth0 *e = calloc(1, sizeof(*e));
	if (!e)
		return rc;
	if (inet_pton(AF_INET, address, &e->addr.sin_addr) != 1 || !remember(e)) {
		free(e);
		return rc;
	}
	e->addr.sin_family = AF_INET;
	e->mask.sin_family = AF_INET;
	e->mask.sin_addr.s_addr = htonl(0xffffffff);
	strcpy(e->name, "eth0");
	e->ifa.ifa_name = e->name;
	e->ifa.ifa_flags = IFF_UP | IFF_RUNNING;
	e->ifa.ifa_addr = (struct sockaddr *)&e->addr;
	e->ifa.ifa_netmask = (struct sockaddr *)&e->mask;
	e->ifa.ifa_next = *ifap;
	*ifap = &e->ifa;
	return 0;
}

void freeifaddrs(struct ifaddrs *ifa)
{
	void (*real)(struct ifaddrs *) = (void (*)(struct ifaddrs *))dlsym(RTLD_NEXT, "freeifaddrs");
	if (ifa && forget(ifa)) {
		struct ifaddrs *next = ifa->ifa_next;
		free(ifa);
		ifa = next;
	}
	if (ifa)
		real(ifa);
}
