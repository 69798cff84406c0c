// Wrapper module: builds OpenKruise's CloneSet controller, and only it, for poolguard's e2e
// tier (never vendored). kruise-manager starts every OpenKruise controller and webhook; this
// main starts the one controller the tests compare poolguard's predictions with, through the
// same package (pkg/controller/cloneset) and the same controller-runtime manager options.
package main

import (
	"flag"
	"os"

	appsv1alpha1 "github.com/openkruise/kruise/apis/apps/v1alpha1"
	kruiseclient "github.com/openkruise/kruise/pkg/client"
	"github.com/openkruise/kruise/pkg/controller/cloneset"
	"github.com/openkruise/kruise/pkg/features"
	utilclient "github.com/openkruise/kruise/pkg/util/client"
	"github.com/openkruise/kruise/pkg/util/fieldindex"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/klogr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(appsv1alpha1.AddToScheme(scheme))
	// kruise-manager registers its types in client-go's scheme too; its clients rely on it.
	utilruntime.Must(appsv1alpha1.AddToScheme(clientgoscheme.Scheme))
}

// ownerUIDs indexes an object by the UIDs of its owners: the one field index the CloneSet
// controller lists its pods and PVCs with (kruise registers it with many others it does not use).
func ownerUIDs(obj client.Object) []string {
	var owners []string
	for _, ref := range obj.GetOwnerReferences() {
		owners = append(owners, string(ref.UID))
	}
	return owners
}

func fail(err error, what string) {
	klog.ErrorS(err, what)
	os.Exit(1)
}

func main() {
	klog.InitFlags(nil)
	flag.Parse()
	ctrl.SetLogger(klogr.New())
	features.SetDefaultFeatureGates()

	ctx := ctrl.SetupSignalHandler()
	cfg := ctrl.GetConfigOrDie()
	cfg.UserAgent = "kruise-manager"
	if err := kruiseclient.NewRegistry(cfg); err != nil {
		fail(err, "unable to create the kruise clients")
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		NewCache:               utilclient.NewCache,
	})
	if err != nil {
		fail(err, "unable to create the manager")
	}
	for _, obj := range []client.Object{&v1.Pod{}, &v1.PersistentVolumeClaim{}} {
		if err := mgr.GetFieldIndexer().IndexField(ctx, obj, fieldindex.IndexNameForOwnerRefUID, ownerUIDs); err != nil {
			fail(err, "unable to index owners")
		}
	}
	if err := cloneset.Add(mgr); err != nil {
		fail(err, "unable to add the CloneSet controller")
	}
	klog.InfoS("starting the CloneSet controller")
	if err := mgr.Start(ctx); err != nil {
		fail(err, "manager stopped")
	}
}
