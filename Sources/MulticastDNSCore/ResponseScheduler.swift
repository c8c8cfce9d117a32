import DNSWire

/// A record identity for rate limiting: name, data, and the interface and IP family it went
/// out on. 224.0.0.251 and ff02::fb are two groups: a record multicast over IPv4 has not
/// reached a host that listens over IPv6 only, so the once-a-second rule (§6) and the
/// "multicast lately" of §5.4 are kept per family. Kept per interface only, the IPv4 response
/// (always sent first) marked the records as sent, and under a steady stream of queries the
/// IPv6 response was deferred again every second: IPv6 got no multicast answer for as long as
/// the stream lasted.
struct RecordKey: Hashable {
    var name: DomainName
    var data: RecordData
    var interface: NetworkInterface
    var family: IPFamily

    init(_ record: ResourceRecord, on interface: NetworkInterface, family: IPFamily) {
        name = record.name
        data = record.data
        self.interface = interface
        self.family = family
    }
}

/// Where a response goes.
struct PendingResponseKey: Hashable {
    var interface: NetworkInterface
    var destination: Destination
    /// Legacy unicast responses echo the query's id and question.
    var legacyID: UInt16?
}

/// Who waits for a pending response, as far as known answers (§7.2) need to know: nobody yet,
/// one host, or several. Not a set of addresses: a flood from spoofed sources would grow it.
enum Askers: Equatable {
    case nobody
    case one(SocketAddress)
    case several

    mutating func add(_ other: Askers) {
        switch (self, other) {
        case (_, .nobody): break
        case (.nobody, _): self = other
        case (.one(let mine), .one(let theirs)) where mine == theirs: break
        default: self = .several
        }
    }
}

/// A response being gathered until it is due.
struct PendingResponse {
    var answers: [ResourceRecord] = []
    var legacyQuestions: [Question] = []
    var family: IPFamily
    /// When it is scheduled to go.
    var due: Duration
    /// Whose queries put answers in it.
    var askers: Askers = .nobody
}

/// The responder's answers waiting to go, and when each record was last multicast: the rules
/// about *when* an answer may go, in one place. At most once a second per record on the group
/// (§6), a QU answer by unicast only after a recent multicast (§5.4), answers struck by
/// known answers (§7.1) and by another responder's identical answer (§7.4). What to answer is
/// the responder's business; when, this one's.
struct ResponseScheduler {
    private var lastMulticast: [RecordKey: Duration] = [:]
    private var pending: [PendingResponseKey: PendingResponse] = [:]

    /// Notes records that went to the group of `family` (goodbyes, with TTL 0, do not count).
    mutating func noteMulticast(_ records: [ResourceRecord], on interface: NetworkInterface, family: IPFamily, at now: Duration) {
        for record in records where record.ttl > 0 { lastMulticast[RecordKey(record, on: interface, family: family)] = now }
    }

    /// Whether `record` went to the group of `family` within a quarter of its TTL (§5.4).
    func wasMulticastRecently(_ record: ResourceRecord, on interface: NetworkInterface, family: IPFamily, at now: Duration) -> Bool {
        lastMulticast[RecordKey(record, on: interface, family: family)].map { now - $0 < .ttl(record.ttl) / 4 } ?? false
    }

    /// Adds records to the response for `key` (each once), to go at `due` or sooner. Returns
    /// true when the response must be scheduled: it is new, or due sooner than it was.
    mutating func queue(
        _ records: [ResourceRecord], for key: PendingResponseKey, family: IPFamily, due: Duration, legacyQuestions: [Question]? = nil,
        askers: Askers = .nobody
    ) -> Bool {
        var sooner = false
        // Mutated in place: a busy link queues the same answers over and over, and a copy of
        // the list each time would cost more than the rest of the query.
        withPending(key, family: family, due: due) { response, isNew in
            if let legacyQuestions { response.legacyQuestions = legacyQuestions }
            response.askers.add(askers)
            for record in records where !response.answers.contains(record) { response.answers.append(record) }
            if isNew || due < response.due {
                response.due = min(response.due, due)
                sooner = true
            }
        }
        return sooner
    }

    private mutating func withPending(
        _ key: PendingResponseKey, family: IPFamily, due: Duration, _ body: (inout PendingResponse, Bool) -> Void
    ) {
        if let index = pending.index(forKey: key) {
            body(&pending.values[index], false)
        } else {
            var response = PendingResponse(family: family, due: due)
            body(&response, true)
            pending[key] = response
        }
    }

    /// The response for `key`, taken out (nil when nothing is left of it).
    mutating func take(_ key: PendingResponseKey) -> PendingResponse? {
        pending.removeValue(forKey: key)
    }

    /// §7.1, §7.2: answers the asker lists as known (in a later packet of its query), with at
    /// least half our TTL, need not go to it. Only the asker's own list counts, and only while
    /// no other host waits for the same response: what `source` holds says nothing about what
    /// the others lack. (Struck on anyone's word, one packet listing our records as known, a
    /// flood's forged or not, silenced what every other querier on the link was waiting for.)
    mutating func strikeKnownAnswers(_ known: [ResourceRecord], on interface: NetworkInterface, from source: SocketAddress) {
        for (key, response) in pending where key.interface == interface && key.legacyID == nil {
            switch key.destination {
            case .unicast(let address): guard address == source else { continue }
            case .multicast: guard response.askers == .one(source) else { continue }
            }
            var trimmed = response
            trimmed.answers.removeAll { record in
                known.contains { $0.name == record.name && $0.data == record.data && $0.ttl >= record.ttl / 2 }
            }
            pending[key] = trimmed
        }
    }

    /// §7.4: multicast answers another responder just sent to the group of `family`, with a
    /// TTL no lower than ours, count as sent there. Returns how many were struck.
    mutating func strikeDuplicates(_ seen: [ResourceRecord], on interface: NetworkInterface, family: IPFamily, at now: Duration) -> Int {
        var struck = 0
        for (key, response) in pending where key.interface == interface && key.destination == .multicast(family) {
            var trimmed = response
            trimmed.answers.removeAll { record in
                guard seen.contains(where: { $0.name == record.name && $0.data == record.data && $0.ttl >= record.ttl }) else {
                    return false
                }
                lastMulticast[RecordKey(record, on: interface, family: family)] = now
                struck += 1
                return true
            }
            pending[key] = trimmed
        }
        return struck
    }

    /// §6: splits multicast answers for the group of `family` into those that may go now and
    /// those multicast there less than a second ago, which are owed until the earliest moment
    /// one of them may go.
    func split(_ answers: [ResourceRecord], on interface: NetworkInterface, family: IPFamily, at now: Duration)
        -> (fresh: [ResourceRecord], owed: [ResourceRecord], owedUntil: Duration?)
    {
        var fresh: [ResourceRecord] = []
        var owed: [ResourceRecord] = []
        var owedUntil: Duration?
        for record in answers {
            if let last = lastMulticast[RecordKey(record, on: interface, family: family)], now - last < MDNSTiming.multicastRecordInterval {
                owed.append(record)
                owedUntil = min(owedUntil ?? last + MDNSTiming.multicastRecordInterval, last + MDNSTiming.multicastRecordInterval)
            } else {
                fresh.append(record)
            }
        }
        return (fresh, owed, owedUntil)
    }
}
