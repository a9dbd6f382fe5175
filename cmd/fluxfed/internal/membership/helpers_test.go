package membership

import "k8s.io/client-go/rest"

var testConfig = &rest.Config{Host: "https://127.0.0.1:6443"}
