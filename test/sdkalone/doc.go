// Package sdkalone holds the test that a load-balancer module's author
// needs the SDK module (sdk/) alone: it builds and tests a module in a
// directory outside this repository, the way a user would, and checks that
// the module's go.mod pulls in nothing of Kubernetes.
package sdkalone
