import DNSWire

/// §8.1: conflicts counted over a sliding 10 s window; 15 of them slow probing down.
struct ConflictLimiter {
    private var times: [Duration] = []

    mutating func note(at now: Duration) { times.append(now) }

    mutating func isRateLimited(at now: Duration) -> Bool {
        times.removeAll { now - $0 > MDNSTiming.conflictWindow }
        return times.count >= MDNSTiming.conflictLimit
    }
}

/// Claiming names (RFC 6762 §8, §9): probing, announcing, simultaneous-probe tiebreaks,
/// conflicts and renames, and noticing another responder on this machine.
extension MDNSCore {
    // MARK: Probing and announcing

    func restartProbing(_ set: RecordSet, delay: Bool, extraDelay: Duration = .zero) {
        set.generation += 1
        set.state = .probing(step: 0)
        var wait = Duration.zero
        if delay {
            // §8.1: sets that start probing while another's random start is still ahead join
            // it, so that their probes (and then their announcements) go out together and are
            // packed into a few packets (`takeOutgoing()`), as the RFC asks of a host probing
            // several names; the random start still sets this host apart from others.
            if let train = probeTrain, train >= now {
                wait = train - now
            } else {
                wait = random.duration(in: MDNSTiming.probeInitialDelay)
                probeTrain = now + wait
            }
        }
        wait += extraDelay
        if rateLimited { wait = max(wait, MDNSTiming.conflictBackoff) }
        scheduler.schedule(.probe(set.id, generation: set.generation), at: now + wait)
    }

    /// §8.1: after 15 conflicts within 10 s, every probe waits 5 s.
    var rateLimited: Bool { conflicts.isRateLimited(at: now) }

    func probeStep(_ id: Int, generation: Int) {
        guard let set = recordSets[id], set.generation == generation, case .probing(let step) = set.state else { return }
        if step == MDNSTiming.probeCount {
            // 250 ms after the third probe and no conflict: the name is ours (§8.1).
            set.state = .announcing(step: 0)
            switch set.kind {
            case .host: eventQueue.append(.hostNameRegistered(set.name))
            case .service, .proxiedHost: eventQueue.append(.registered(RegistrationID(rawValue: id), name: set.name))
            }
            announceStep(id, generation: generation)
            return
        }
        for interface in sortedInterfaces {
            let proposed = ownedRecords(of: set, on: interface)
            guard !proposed.isEmpty else { continue }
            // The first probe asks for a unicast reply (QU), which reaches us sooner (§8.1).
            let question = Question(name: set.name, type: .any, unicastResponse: step == 0 && unicastRepliesReachUs)
            if question.unicastResponse { lastUnicastRequest = now }
            sendMulticast(Message(questions: [question], authorities: proposed), on: interface)
        }
        set.state = .probing(step: step + 1)
        var wait = MDNSTiming.probeInterval
        if rateLimited { wait = max(wait, MDNSTiming.conflictBackoff) }
        scheduler.schedule(.probe(id, generation: generation), at: now + wait)
    }

    func announceStep(_ id: Int, generation: Int) {
        guard let set = recordSets[id], set.generation == generation, case .announcing(let step) = set.state else {
            return
        }
        for interface in sortedInterfaces {
            let answers = ownedRecords(of: set, on: interface) + sharedRecords(of: set)
            guard !answers.isEmpty else { continue }
            let additionals = additionalRecords(for: answers, on: interface)
            sendMulticast(Message(header: .response, answers: answers, additionals: additionals), on: interface)
        }
        if step + 1 < MDNSTiming.announceCount {
            set.state = .announcing(step: step + 1)
            // Intervals at least double: 1 s, 2 s, … (§8.3).
            let interval = MDNSTiming.announceInterval * (1 << step)
            scheduler.schedule(.announce(id, generation: generation), at: now + interval)
        } else {
            set.state = .established
        }
    }


    /// RFC 6762 §14: a host with two interfaces on one link (a second NIC on the same switch,
    /// Wi-Fi bridged to the wired LAN) hears on each what it multicast on the other, and each
    /// interface probes and announces its own addresses. A packet from an address of another
    /// of our interfaces holding only records we publish is such a copy: not a rival's probe
    /// (its other address records would lose us the tiebreak, §8.2), not a conflict (§9), not
    /// another responder claiming our host name. Another responder on this machine is still
    /// noticed: the multicast loop shows us its packets on the interface they left by, whose
    /// address they bear.
    func isOwnPacket(_ received: ReceivedMessage) -> Bool {
        let source = received.source.address.withoutScope
        guard ownAddresses.contains(source),
            !(interfaces[received.interface] ?? []).contains(where: { $0.withoutScope == source })
        else { return false }
        let records = received.message.allRecords
        return !records.isEmpty && records.allSatisfy(isPublished)
    }

    /// Whether an active record set of ours publishes `record` (its name and data, whatever
    /// the TTL) on any of our interfaces.
    func isPublished(_ record: ResourceRecord) -> Bool {
        recordSets.values.contains { set in
            guard set.isActive else { return false }
            if set.name == record.name,
                interfaces.keys.contains(where: { interface in ownedRecords(of: set, on: interface).contains { $0.data == record.data } })
            {
                return true
            }
            return sharedRecords(of: set).contains { $0.name == record.name && $0.data == record.data }
        }
    }

    /// A response from this very machine (our own packets never get here: the engine drops
    /// the copies the multicast loop brings back, ``isOwnPacket(_:)`` those our other
    /// interfaces hear) giving this machine's addresses for our host name comes from another
    /// responder, which then owns the host name; its goodbye for them hands the name back to us.
    func noticeLocalResponder(_ received: ReceivedMessage) {
        guard let host = hostSetID.flatMap({ recordSets[$0] }),
            ownAddresses.contains(received.source.address.withoutScope)
        else { return }
        for record in received.message.answers + received.message.additionals where record.name == host.name {
            guard let address = record.addressValue, ownAddresses.contains(address) else { continue }
            if record.ttl > 0 && !hostNameOwnedElsewhere {
                hostNameOwnedElsewhere = true
            } else if record.ttl == 0 && hostNameOwnedElsewhere {
                hostNameOwnedElsewhere = false
                if host.isActive { restartProbing(host, delay: true) }
            }
        }
    }

    /// §8.1 and §9: a response naming one of our unique names with other data is a conflict.
    func detectConflicts(in message: Message, on interface: NetworkInterface) {
        for record in message.answers + message.additionals {
            for set in Array(recordSets.values) where set.isActive && set.name == record.name {
                let ours = ownedRecords(of: set, on: interface)
                if ours.contains(where: { $0.data == record.data }) { continue }
                if case .host = set.kind {
                    // Another responder on this machine (avahi-daemon, say) announcing one of
                    // this machine's addresses, or other data about the host, is no rival:
                    // claiming the host name against it would start a rename ping-pong.
                    guard let address = record.addressValue, !ownAddresses.contains(address) else { continue }
                }
                let sameType = ours.contains { $0.type == record.type }
                if isProbing(set) {
                    conflict(set, rename: true)
                } else if sameType {
                    conflict(set, rename: false)
                }
            }
        }
    }

    func conflict(_ set: RecordSet, rename: Bool) {
        conflicts.note(at: now)
        if rename, !set.renames {
            // Another device's name (an advertising proxy): not ours to change. Given up, its
            // owner told; nothing was announced under it while probing, so no goodbyes.
            set.state = .withdrawn
            set.generation += 1
            recordSets[set.id] = nil
            eventQueue.append(.conflicted(RegistrationID(rawValue: set.id), name: set.name))
            return
        }
        if rename {
            let old = set.name
            set.attempt += 1
            switch set.kind {
            case .host(let label): set.name = RecordSet.hostName(label, attempt: set.attempt)
            case .service(let registration): set.name = RecordSet.instanceName(registration, attempt: set.attempt)
            case .proxiedHost: break  // never renamed (see above)
            }
            if set.isService { eventQueue.append(.renamed(RegistrationID(rawValue: set.id), from: old, to: set.name)) }
            // A renamed host changes the SRV targets of every service: re-announce them.
            if case .host = set.kind {
                for service in recordSets.values where service.isService && !isProbing(service) {
                    restartProbing(service, delay: true)
                }
            }
        }
        restartProbing(set, delay: true)
    }

    /// §8.2: a probe for a name we are probing too is settled by comparing the proposed
    /// records; a probe for a name we already hold is answered at once to defend it.
    func handleProbe(_ received: ReceivedMessage) {
        let probe = received.message
        for question in probe.questions {
            guard let set = recordSets.values.first(where: { $0.name == question.name && $0.isActive }) else {
                continue
            }
            let theirs = probe.authorities.filter { $0.name == set.name }
            let ours = ownedRecords(of: set, on: received.interface)
            let comparison = Self.compareRecordSets(ours, theirs)
            if comparison == 0 { continue }  // identical: our own probe, or the same data
            if isProbing(set) {
                if comparison < 0 {
                    // We lose: wait a second and probe again (§8.2).
                    restartProbing(set, delay: false, extraDelay: MDNSTiming.tiebreakDelay)
                }
            } else {
                // Defend: answer immediately, multicast, with our records for the name.
                sendMulticast(Message(header: .response, answers: ours), on: received.interface)
            }
        }
    }

    /// Orders two sets of records as RFC 6762 §8.2 does: sorted by class, type and raw rdata,
    /// then compared entry by entry; the longer set wins a tie of the common part.
    static func compareRecordSets(_ ours: [ResourceRecord], _ theirs: [ResourceRecord]) -> Int {
        func keys(_ records: [ResourceRecord]) -> [[UInt8]] {
            records.map { record in
                let classType = [UInt8(record.class.rawValue >> 8), UInt8(record.class.rawValue & 0xFF),
                                 UInt8(record.type.rawValue >> 8), UInt8(record.type.rawValue & 0xFF)]
                return classType + ((try? record.data.uncompressedBytes()) ?? [])
            }.sorted { $0.lexicographicallyPrecedes($1) }
        }
        let a = keys(ours)
        let b = keys(theirs)
        for (x, y) in zip(a, b) where x != y {
            return x.lexicographicallyPrecedes(y) ? -1 : 1
        }
        return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
    }
}
