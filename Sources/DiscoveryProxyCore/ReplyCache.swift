/// Encoded UDP replies kept for questions asked again byte for byte (all but the message ID),
/// so that the proxy answers the questions a site's resolver repeats all day without decoding
/// the question or encoding the answer again.
///
/// An entry is good only while what the links said is unchanged: every entry carries the
/// answering machine's version of the link records (``ProxyStateMachine`` bumps it on every
/// change, and when it stops a link question), and the first look-up at a newer version empties
/// the cache. The key is the whole question after its ID (flags, counts, the question as asked,
/// with its case, and the OPT record with its payload size), so a hit is the very reply the
/// machine would have made. Bounded: a reply that finds ``capacity`` entries kept empties the
/// cache first (counted in ``emptiedFull``), so that questions nobody repeats (a flood of names
/// made up, say) cost the repeated ones a fresh answer at worst, never their place for good.
struct ReplyCache: Sendable {
    /// What a reply counted when it was made, counted again on each hit.
    enum Counted: Sendable, Hashable {
        case answered
        case answeredFromLink
        case noData
        case refusedOutsideZones
    }

    struct Entry: Sendable {
        /// The reply after its 2-byte ID.
        var reply: [UInt8]
        var counted: [Counted]
        /// The link questions the reply came from (with an SRV's follow-up address questions):
        /// a hit counts as asking them, so that they are not stopped as idle while answered
        /// from here.
        var asked: [ProxyStateMachine.LinkKey]
    }

    let capacity: Int
    private(set) var version: UInt64 = 0
    private var entries: [ArraySlice<UInt8>: Entry] = [:]
    /// Times the cache was found full and emptied.
    private(set) var emptiedFull = 0

    init(capacity: Int) { self.capacity = capacity }

    var count: Int { entries.count }

    /// The kept reply for `query` (a whole DNS message, ID first) at `version`, or nil.
    mutating func lookUp(_ query: [UInt8], version: UInt64) -> Entry? {
        guard query.count > 12 else { return nil }
        if version != self.version {
            entries.removeAll(keepingCapacity: true)
            self.version = version
            return nil
        }
        return entries[query[2...]]
    }

    /// Keeps `reply` (ID first, as sent) for `query` at `version`.
    mutating func keep(_ reply: [UInt8], for query: [UInt8], version: UInt64, counted: [Counted], asked: [ProxyStateMachine.LinkKey]) {
        guard query.count > 12, reply.count > 2, capacity > 0 else { return }
        if version != self.version {
            entries.removeAll(keepingCapacity: true)
            self.version = version
        }
        if entries.count >= capacity {
            entries.removeAll(keepingCapacity: true)
            emptiedFull += 1
        }
        // A copy of the key of its own, so that the kept slice does not hold the whole query's
        // storage.
        entries[ArraySlice(Array(query[2...]))] = Entry(reply: Array(reply[2...]), counted: counted, asked: asked)
    }
}
