// Command client-go-controller is an unmodified-style informer controller:
// a client-go 0.36 shared informer with the library's defaults (protobuf for
// built-in kinds, watch-list when the server offers it), configured the way
// a controller in a pod is (rest.InClusterConfig) or from --kubeconfig.
//
// It exists so that shardcar's tests and benchmarks can put the kind of
// controller most clusters run behind the sidecar and look at its cache and
// its memory. It sets nothing that changes client-go's defaults: no content
// type, no feature gates, no GOGC; KUBE_FEATURE_* and GO* environment
// variables still apply, as they would to any controller.
//
// On start it prints one JSON line on stdout,
//
//	{"ready":"http://127.0.0.1:PORT","resource":"pods","namespace":""}
//
// once its loopback endpoint listens (before the cache has synced):
//
//	GET /status   {"synced":bool,"objects":n,"adds":n,"updates":n,"deletes":n,"rss":bytes,"peakRss":bytes,"goHeap":bytes,"goSys":bytes}
//	GET /objects  {"synced":bool,"items":[{"key":"ns/name","uid":"…","rv":"…"},…]}
//	POST /gc      runtime.GC + debug.FreeOSMemory, then /status (memory "at rest")
//
// Built in GOPATH mode (no go.mod), where Go would otherwise apply the
// GODEBUG defaults of an old language version; a controller built from a
// module gets its toolchain's, and so does this one.
//
//go:debug default=go1.26
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

type counters struct{ adds, updates, deletes atomic.Int64 }

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file; empty: in-cluster config (KUBERNETES_SERVICE_HOST/PORT and the service-account files)")
	resource := flag.String("resource", "pods", "pods, configmaps, or GROUP/VERSION/RESOURCE for a custom resource (dynamic client)")
	namespace := flag.String("namespace", "", "watch only this namespace (empty: all)")
	listen := flag.String("listen", "127.0.0.1:0", "loopback address of the status endpoint")
	flag.Parse()

	host, _, err := net.SplitHostPort(*listen)
	if err != nil || (host != "127.0.0.1" && host != "::1" && host != "localhost") {
		fail("invalid --listen %q: the status endpoint listens on loopback only (127.0.0.1:PORT)", *listen)
	}
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		fail("%v", err)
	}
	informer, err := newInformer(cfg, *resource, *namespace)
	if err != nil {
		fail("%v", err)
	}
	var n counters
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { n.adds.Add(1) },
		UpdateFunc: func(any, any) { n.updates.Add(1) },
		DeleteFunc: func(any) { n.deletes.Add(1) },
	}); err != nil {
		fail("adding the event handler: %v", err)
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fail("listening on %s: %v", *listen, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go informer.RunWithContext(ctx)
	go func() { _ = http.Serve(ln, endpoints(informer, &n)) }()

	ready, _ := json.Marshal(map[string]string{"ready": "http://" + ln.Addr().String(), "resource": *resource, "namespace": *namespace})
	fmt.Println(string(ready))
	<-ctx.Done()
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "client-go-controller: "+format+"\n", args...)
	os.Exit(2)
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config (no --kubeconfig given): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

// newInformer builds the informer as a controller would: the typed factory
// for built-in kinds (protobuf by default), the dynamic one for the rest.
func newInformer(cfg *rest.Config, resource, namespace string) (cache.SharedIndexInformer, error) {
	switch resource {
	case "pods", "configmaps":
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
		if resource == "pods" {
			return f.Core().V1().Pods().Informer(), nil
		}
		return f.Core().V1().ConfigMaps().Informer(), nil
	}
	parts := strings.Split(resource, "/")
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return nil, fmt.Errorf("invalid --resource %q: expected pods, configmaps or GROUP/VERSION/RESOURCE (e.g. example.com/v1/widgets)", resource)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, namespace, nil)
	return f.ForResource(schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]}).Informer(), nil
}

type item struct {
	Key string `json:"key"`
	UID string `json:"uid"`
	RV  string `json:"rv"`
}

func endpoints(informer cache.SharedIndexInformer, n *counters) http.Handler {
	mux := http.NewServeMux()
	status := func(w http.ResponseWriter) {
		rss, peak := procRss()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		writeJSON(w, map[string]any{
			"synced": informer.HasSynced(), "objects": len(informer.GetStore().ListKeys()),
			"adds": n.adds.Load(), "updates": n.updates.Load(), "deletes": n.deletes.Load(),
			"rss": rss, "peakRss": peak, "goHeap": ms.HeapAlloc, "goSys": ms.Sys,
		})
	}
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) { status(w) })
	mux.HandleFunc("POST /gc", func(w http.ResponseWriter, _ *http.Request) {
		runtime.GC()
		debug.FreeOSMemory()
		status(w)
	})
	mux.HandleFunc("GET /objects", func(w http.ResponseWriter, _ *http.Request) {
		objs := informer.GetStore().List()
		items := make([]item, 0, len(objs))
		for _, o := range objs {
			m, err := metaOf(o)
			if err != nil {
				continue
			}
			key := m.GetName()
			if ns := m.GetNamespace(); ns != "" {
				key = ns + "/" + key
			}
			items = append(items, item{Key: key, UID: string(m.GetUID()), RV: m.GetResourceVersion()})
		}
		sort.Slice(items, func(i, j int) bool { return items[i].Key < items[j].Key })
		writeJSON(w, map[string]any{"synced": informer.HasSynced(), "items": items})
	})
	return mux
}

func metaOf(o any) (metav1.Object, error) {
	if m, ok := o.(metav1.Object); ok {
		return m, nil
	}
	if a, ok := o.(interface{ GetObjectMeta() metav1.Object }); ok {
		return a.GetObjectMeta(), nil
	}
	return nil, fmt.Errorf("no object metadata on %T", o)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("content-type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// procRss reads VmRSS and VmHWM (peak) from /proc/self/status, in bytes.
func procRss() (rss, peak int64) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1, -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			rss = kb * 1024
		case "VmHWM:":
			peak = kb * 1024
		}
	}
	return rss, peak
}
