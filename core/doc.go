// Package core holds the types every part of PolyGateway speaks: the call
// and result types, the four-class error taxonomy, the port interfaces that
// backends implement, and the Handler/Middleware shape of the onion.
//
// It imports the standard library only. Every other package of the module
// depends on it; it depends on none of them. The root package re-exports its
// public types as aliases.
package core
