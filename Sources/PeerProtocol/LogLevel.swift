/// How much a machine's log line matters. The machines here only say what happened; the shell
/// in PeerConnection writes it with swift-log at the level of the same name, so the core does no
/// I/O and needs no logging library.
package enum LogLevel: Sendable, Hashable {
    case trace, debug, info, notice, warning, error
}
