import DNSWire
import MulticastDNSCore
import Testing

let agentType = try! ServiceType(parsing: "_openagents._tcp")

func registration(_ instance: String, port: UInt16 = 9099, txt: [String] = ["version=0.2.2"]) -> ServiceRegistration {
    ServiceRegistration(instance: instance, type: agentType, port: port, txt: try! DiscoveryInfo(txt))
}

func instanceName(_ instance: String) -> DomainName {
    try! ServiceInstanceName(instance, type: agentType).domainName
}

@Suite("Responder: probing, announcing, conflicts, answers")
struct ResponderTests {
    /// A querier on the link, at 198.18.1.50.
    static let querier = SocketAddress(.v4(IPv4Address(198, 18, 1, 50)), port: 5353)

    /// A LAN where "alpha" registered "Box" and `duration` has passed.
    func alphaPublishingBox(for duration: Duration) -> (SimulatedLAN, SimulatedLAN.Host) {
        let lan = SimulatedLAN()
        let alpha = lan.addHost("alpha")
        _ = alpha.core.register(registration("Box"))
        lan.run(for: duration)
        return (lan, alpha)
    }

    @Test("a dry run's plan (PublishedRecords.advertisement) is exactly what the responder announces")
    func planMatchesAnnouncement() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        lan.run(for: .seconds(2))
        let start = lan.now
        var published = registration("Build Box", txt: ["version=0.2.2", "tls"])
        published.subtypes = ["_bridge"]
        _ = a.core.register(published)
        lan.run(for: .seconds(5))
        let announced = lan.sent(by: a, since: start).filter { $0.message.header.isResponse }.flatMap(\.message.allRecords)
        let plan = PublishedRecords.advertisement(published, hostLabel: "alpha", addresses: [.v4(a.address)])
        #expect(plan.map(\.type) == [.ptr, .ptr, .ptr, .srv, .txt, .a])
        for record in plan {
            #expect(announced.contains(record), "planned but never announced: \(record)")
        }
        // Nothing of the service or the host is announced that the plan leaves out.
        let ours = announced.filter { $0.name == "alpha.local." || $0.name == instanceName("Build Box")
            || ($0.type == .ptr && ($0.data == .ptr(instanceName("Build Box")) || $0.data == .ptr(agentType.domainName))) }
        for record in ours { #expect(plan.contains(record), "announced but not planned: \(record)") }
    }

    @Test("probes three times 250 ms apart, wins after 750 ms, then announces twice")
    func probeAndAnnounce() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        lan.addHost("beta")
        lan.run(for: .seconds(2))  // host names settle first
        let start = lan.now
        _ = a.core.register(registration("Build Box"))
        lan.run(for: .seconds(5))

        let sent = lan.sent(by: a, since: start)
        // The host name wakes with the first service and probes in the same packets (§8.1).
        let ours = { (question: Question) in question.name == instanceName("Build Box") }
        let probes = sent.filter { $0.message.isProbe && $0.message.questions.contains(where: ours) }
        #expect(probes.count == 3)
        #expect(probes.first?.message.questions.first(where: ours)?.unicastResponse == true)
        #expect(probes.dropFirst().allSatisfy { $0.message.questions.first(where: ours)?.unicastResponse == false })
        #expect(probes.first?.message.authorities.filter { $0.name == instanceName("Build Box") }.map(\.type).sorted() == [.txt, .srv])

        let times = lan.wire.filter { $0.from == "alpha" && $0.time >= start && $0.message.isProbe && $0.message.questions.contains(where: ours) }.map(\.time)
        try #require(times.count == 3)
        #expect(times[0] - start <= .milliseconds(250))
        #expect(times[1] - times[0] == .milliseconds(250))
        #expect(times[2] - times[1] == .milliseconds(250))

        #expect(a.registeredNames.contains(instanceName("Build Box")))
        let announcements = lan.wire.filter {
            $0.from == "alpha" && $0.time > times[2] && $0.message.header.isResponse
                && $0.message.answers.contains { $0.name == instanceName("Build Box") && $0.type == .srv }
        }
        #expect(announcements.count == 2)
        #expect(announcements[0].time - times[2] == .milliseconds(250))
        #expect(announcements[1].time - announcements[0].time == .seconds(1))
        let first = try #require(announcements.first?.message)
        #expect(first.answers.contains { $0.type == .ptr && $0.name == agentType.domainName && !$0.cacheFlush })
        #expect(first.answers.contains { $0.type == .srv && $0.cacheFlush && $0.ttl == 120 })
        #expect(first.answers.contains { $0.type == .txt && $0.cacheFlush && $0.ttl == 4500 })
        #expect(first.answers.contains { $0.name == "_services._dns-sd._udp.local." && $0.data == .ptr(agentType.domainName) })
        // The host name, woken by this first advertisement, is probed alongside and announced
        // with its own records.
        #expect(lan.sent(by: a, since: start).contains {
            $0.message.header.isResponse && $0.message.allRecords.contains { $0.type == .a && $0.name == "alpha.local." }
        })
    }

    @Test("a browser on another host finds the service with SRV, TXT and address")
    func browseFinds() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        let b = lan.addHost("beta")
        _ = a.core.register(registration("Build Box", txt: ["version=0.2.2", "tls"]))
        lan.run(for: .seconds(3))
        let browse = b.core.startQuery(name: agentType.domainName, type: .ptr)
        lan.run(for: .milliseconds(200))
        let found = b.liveRecords(browse)
        #expect(found.map(\.data) == [.ptr(instanceName("Build Box"))])
        // The answer carried SRV, TXT and A as additionals, so the cache resolves it.
        let srv = b.core.cachedRecords(name: instanceName("Build Box"), type: .srv)
        #expect(srv.first?.0.data == .srv(SRVData(port: 9099, target: "alpha.local.")))
        let txt = try #require(b.core.cachedRecords(name: instanceName("Build Box"), type: .txt).first?.0)
        guard case .txt(let data) = txt.data else { Issue.record("no TXT"); return }
        #expect(DiscoveryInfo(data).string(for: "version") == "0.2.2")
        #expect(b.core.cachedRecords(name: "alpha.local.", type: .a).first?.0.data == .a(a.address))
    }

    @Test("two hosts registering the same name at once: one keeps it, the other becomes \"Name (2)\"")
    func simultaneousConflict() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        let b = lan.addHost("beta")
        let c = lan.addHost("gamma")
        lan.run(for: .seconds(2))
        _ = a.core.register(registration("Box", port: 1))
        _ = b.core.register(registration("Box", port: 2))
        lan.run(for: .seconds(8))
        let names = Set(a.registeredNames + b.registeredNames)
        #expect(names == [instanceName("Box"), instanceName("Box (2)")])
        let renamed = (a.events + b.events).contains { event in
            if case .renamed(_, let from, let to) = event { return from == instanceName("Box") && to == instanceName("Box (2)") }
            return false
        }
        #expect(renamed)
        let browse = c.core.startQuery(name: agentType.domainName, type: .ptr)
        lan.run(for: .seconds(1))
        #expect(Set(c.liveRecords(browse).map(\.data)) == [.ptr(instanceName("Box")), .ptr(instanceName("Box (2)"))])
    }

    @Test("a late registration of a name already held is renamed; the holder defends and keeps it")
    func lateConflict() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        let b = lan.addHost("beta")
        let first = a.core.register(registration("Box", port: 1))
        lan.run(for: .seconds(4))
        let second = b.core.register(registration("Box", port: 2))
        lan.run(for: .seconds(4))
        #expect(a.core.name(of: first) == instanceName("Box"))
        #expect(b.core.name(of: second) == instanceName("Box (2)"))
        #expect(!a.events.contains { if case .renamed = $0 { return true } else { return false } })
    }

    @Test("identical records from another responder are not a conflict")
    func identicalIsNoConflict() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        let id = a.core.register(registration("Box"))
        lan.run(for: .seconds(4))
        // Another process on the same machine (or a reflector) repeats our own announcement.
        let ours = try #require(lan.sent(by: a).last { $0.message.header.isResponse }?.message)
        lan.inject(ours, to: a, from: SocketAddress(.v4(IPv4Address(198, 18, 1, 9)), port: 5353))
        lan.run(for: .seconds(2))
        #expect(a.core.name(of: id) == instanceName("Box"))
    }

    @Test("the host name is not fought over with another responder on the same machine")
    func hostNameCoexistence() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        lan.run(for: .seconds(2))
        #expect(a.core.hostName == "alpha.local.")
        // avahi-daemon on the same machine announces alpha.local with this machine's address
        // (and an HINFO): not a rival, no rename.
        let avahi = Message(header: .response, answers: [
            ResourceRecord(name: "alpha.local.", data: .a(a.address), ttl: 120, cacheFlush: true),
            ResourceRecord(name: "alpha.local.", data: .hinfo(HINFOData(cpu: Array("X86_64".utf8), os: Array("LINUX".utf8))), ttl: 120, cacheFlush: true),
        ])
        lan.inject(avahi, to: a, from: SocketAddress(.v4(a.address), port: 5353))
        lan.run(for: .seconds(2))
        #expect(a.core.hostName == "alpha.local.")
        // From now on avahi owns alpha.local: our announcements carry no address records,
        // and our SRV records still point at alpha.local.
        #expect(a.core.hostNameOwnedElsewhere)
        let since = lan.now
        _ = a.core.register(registration("Shared Host"))
        lan.run(for: .seconds(3))
        let announced = lan.sent(by: a, since: since).filter { $0.message.header.isResponse }.flatMap { $0.message.allRecords }
        #expect(!announced.isEmpty)
        #expect(!announced.contains { $0.type == .a || $0.type == .aaaa })
        #expect(announced.contains { $0.data == .srv(SRVData(port: 9099, target: "alpha.local.")) })
    }

    @Test("another machine claiming our host name with its own address makes us re-probe, then rename")
    func hostNameRival() throws {
        let (lan, a) = alphaPublishingBox(for: .seconds(2))
        // A different machine claiming alpha.local with another address is a rival.
        let rival = Message(header: .response, answers: [
            ResourceRecord(name: "alpha.local.", data: .a(IPv4Address(198, 18, 1, 77)), ttl: 120, cacheFlush: true),
        ])
        lan.inject(rival, to: a, from: SocketAddress(.v4(IPv4Address(198, 18, 1, 77)), port: 5353))
        lan.run(for: .seconds(2))
        #expect(a.core.hostName == "alpha.local.")  // established: re-probe first, rename only if it persists
        lan.inject(rival, to: a, from: SocketAddress(.v4(IPv4Address(198, 18, 1, 77)), port: 5353))
        lan.run(for: .milliseconds(100))
        lan.inject(rival, to: a, from: SocketAddress(.v4(IPv4Address(198, 18, 1, 77)), port: 5353))
        lan.run(for: .seconds(3))
        #expect(a.core.hostName == "alpha-2.local.")
    }

    @Test("known answers suppress the answer; a missing one is answered after 20-120 ms")
    func knownAnswerSuppression() throws {
        let (lan, a) = alphaPublishingBox(for: .seconds(5))
        let ptr = ResourceRecord(name: agentType.domainName, data: .ptr(instanceName("Box")), ttl: 4500)
        let querier = Self.querier

        let before = lan.now
        var known = ptr
        known.ttl = 4000  // more than half of 4500
        lan.inject(Message(questions: [Question(name: agentType.domainName, type: .ptr)], answers: [known]), to: a, from: querier)
        lan.run(for: .seconds(1))
        #expect(lan.sent(by: a, since: before).isEmpty)

        let later = lan.now
        known.ttl = 2000  // less than half: answer anyway (§7.1)
        lan.inject(Message(questions: [Question(name: agentType.domainName, type: .ptr)], answers: [known]), to: a, from: querier)
        lan.run(for: .seconds(1))
        let answer = try #require(lan.wire.first { $0.from == "alpha" && $0.time >= later && $0.message.header.isResponse })
        #expect(answer.message.answers.contains(ptr))
        #expect(answer.time - later >= .milliseconds(20) && answer.time - later <= .milliseconds(120))
    }

    @Test("unique records are answered at once; TC queries wait 400-500 ms for more known answers")
    func answerTiming() throws {
        let (lan, a) = alphaPublishingBox(for: .seconds(5))
        let querier = Self.querier
        var start = lan.now
        lan.inject(Message(questions: [Question(name: instanceName("Box"), type: .srv)]), to: a, from: querier)
        lan.run(for: .seconds(1))
        let immediate = try #require(lan.wire.first { $0.from == "alpha" && $0.time >= start && $0.message.header.isResponse })
        #expect(immediate.time == start)

        start = lan.now
        var truncated = Message(questions: [Question(name: instanceName("Box"), type: .txt)])
        truncated.header.isTruncated = true
        lan.inject(truncated, to: a, from: querier)
        lan.run(for: .seconds(1))
        let delayed = try #require(lan.wire.first { $0.from == "alpha" && $0.time >= start && $0.message.header.isResponse })
        #expect(delayed.time - start >= .milliseconds(400) && delayed.time - start <= .milliseconds(500))
    }

    @Test("known answers in the packets after a TC query suppress the answers waiting for them")
    func multiPacketKnownAnswers() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        _ = a.core.register(registration("Box One"))
        _ = a.core.register(registration("Box Two"))
        lan.run(for: .seconds(5))
        let querier = Self.querier
        let start = lan.now
        var first = Message(questions: [Question(name: agentType.domainName, type: .ptr)])
        first.header.isTruncated = true  // more known answers follow
        lan.inject(first, to: a, from: querier)
        lan.run(for: .milliseconds(100))
        // The second packet: no question, one known answer (Box One).
        let known = ResourceRecord(name: agentType.domainName, data: .ptr(instanceName("Box One")), ttl: 4500)
        lan.inject(Message(answers: [known]), to: a, from: querier)
        lan.run(for: .seconds(1))
        let answers = lan.sent(by: a, since: start).flatMap { $0.message.answers }.filter { $0.type == .ptr && $0.name == agentType.domainName }
        #expect(answers.map(\.data) == [.ptr(instanceName("Box Two"))])
    }

    @Test("a QU question about a record multicast within a quarter of its TTL is answered at once, by unicast (§5.4)")
    func unicastResponseWhenRecentlyMulticast() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        _ = a.core.register(registration("Box"))
        // Announced 2 s ago: the link has the SRV, only the asker lacks it.
        lan.run(for: .seconds(3))
        let querier = Self.querier
        let start = lan.now
        lan.inject(Message(questions: [Question(name: instanceName("Box"), type: .srv, unicastResponse: true)]), to: a, from: querier)
        lan.run(for: .zero)
        let replies = lan.sent(by: a, since: start)
        #expect(replies.count == 1)
        let reply = try #require(replies.first)
        #expect(reply.destination == .unicast(querier))
        #expect(reply.message.answers.contains { $0.type == .srv })
        #expect(lan.wire.last.map { $0.time == start } == true)  // no delay at all
    }

    @Test("a QU question about a record not multicast lately is answered by multicast, renewing every cache (§5.4)")
    func multicastResponseWhenNotRecentlyMulticast() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        _ = a.core.register(registration("Box"))
        // SRV lives 120 s: more than 30 s after the announcements it is not "recent".
        lan.run(for: .seconds(40))
        let querier = Self.querier
        let start = lan.now
        lan.inject(Message(questions: [Question(name: instanceName("Box"), type: .srv, unicastResponse: true)]), to: a, from: querier)
        lan.run(for: .zero)
        let reply = try #require(lan.sent(by: a, since: start).first)
        #expect(reply.destination == .multicast(.v4))
        #expect(reply.message.answers.contains { $0.type == .srv })
    }

    @Test("a QU question from a source off the link is answered by multicast, never by unicast (§11)")
    func offLinkQUGetsMulticast() throws {
        let (lan, a) = alphaPublishingBox(for: .seconds(3))
        let stranger = SocketAddress(.v4(IPv4Address(203, 0, 113, 9)), port: 5353)
        let start = lan.now
        lan.inject(Message(questions: [Question(name: instanceName("Box"), type: .srv, unicastResponse: true)]), to: a, from: stranger, onLink: false)
        lan.run(for: .seconds(2))
        let replies = lan.sent(by: a, since: start)
        #expect(!replies.contains { $0.destination == .unicast(stranger) })
        #expect(replies.contains { $0.destination == .multicast(.v4) && $0.message.answers.contains { $0.type == .srv } })
    }

    @Test("a multicast answer held back by the once-a-second rule is sent when the second is up, not dropped (§6)")
    func rateLimitedAnswerIsOwed() throws {
        let (lan, a) = alphaPublishingBox(for: .seconds(40))
        let querier = Self.querier
        let srvQuestion = Question(name: instanceName("Box"), type: .srv)
        let first = lan.now
        lan.inject(Message(questions: [srvQuestion]), to: a, from: querier)
        lan.run(for: .zero)
        #expect(lan.sent(by: a, since: first).filter { $0.message.answers.contains { $0.type == .srv } }.count == 1)
        // Asked again 300 ms later: the SRV went out 300 ms ago, so it is owed until 1 s.
        lan.run(for: .milliseconds(300))
        let again = lan.now
        lan.inject(Message(questions: [srvQuestion]), to: a, from: querier)
        lan.run(for: .milliseconds(600))
        #expect(lan.sent(by: a, since: again).filter { $0.message.answers.contains { $0.type == .srv } }.isEmpty)
        lan.run(for: .milliseconds(200))
        let owed = lan.wire.filter { $0.from == "alpha" && $0.time > again && $0.message.answers.contains { $0.type == .srv } }
        #expect(owed.count == 1)
        #expect(owed.first.map { $0.time - first } == .seconds(1))
        #expect(owed.first?.destination == .multicast(.v4))
        #expect(a.core.statistics.multicastAnswersDeferred >= 1)
    }

    @Test("the same query every 10 ms for 3 s gets one multicast answer a second: never more, never none (§6)")
    func repeatedQueryIsAnsweredOnceASecond() throws {
        let (lan, a) = alphaPublishingBox(for: .seconds(40))
        let querier = Self.querier
        let question = Question(name: agentType.domainName, type: .ptr)
        let start = lan.now
        for _ in 0..<300 {
            lan.inject(Message(questions: [question]), to: a, from: querier)
            lan.run(for: .milliseconds(10))
        }
        lan.run(for: .seconds(1))
        let answers = lan.wire.filter { $0.from == "alpha" && $0.time >= start && $0.message.answers.contains { $0.type == .ptr } }
        let times = answers.map { $0.time - start }
        // Shared records wait 20–120 ms; then the once-a-second rule holds each next one back.
        #expect(answers.count >= 3 && answers.count <= 4)
        for (earlier, later) in zip(times, times.dropFirst()) { #expect(later - earlier >= .seconds(1)) }
        #expect(answers.allSatisfy { $0.destination == .multicast(.v4) })
    }

    @Test("a host that only browses claims no host name: no probe, no announcement, no defence")
    func browsingClaimsNoHostName() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        _ = a.core.startQuery(name: agentType.domainName, type: .ptr)
        lan.run(for: .seconds(5))
        #expect(lan.sent(by: a).allSatisfy { !$0.message.header.isResponse && !$0.message.isProbe })
        // Someone else calling itself alpha.local is no conflict of ours.
        let other = Message(header: .response, answers: [
            ResourceRecord(name: "alpha.local.", data: .a(IPv4Address(198, 18, 1, 77)), ttl: 120, cacheFlush: true),
        ])
        let start = lan.now
        lan.inject(other, to: a, from: SocketAddress(.v4(IPv4Address(198, 18, 1, 77)), port: 5353))
        lan.run(for: .seconds(3))
        #expect(lan.sent(by: a, since: start).allSatisfy { !$0.message.header.isResponse && !$0.message.isProbe })
        #expect(a.core.hostName == "alpha.local.")
        // The first advertisement wakes the name.
        _ = a.core.register(registration("Box"))
        lan.run(for: .seconds(3))
        #expect(lan.sent(by: a, since: start).contains { $0.message.isProbe && $0.message.questions.contains { $0.name == a.core.hostName } })
    }

    @Test("legacy unicast queries get a unicast reply with the id, the question and TTL ≤ 10 s; off-link ones none")
    func legacyUnicast() throws {
        let (lan, a) = alphaPublishingBox(for: .seconds(5))
        let legacy = SocketAddress(.v4(IPv4Address(198, 18, 1, 60)), port: 40000)
        var query = Message(header: Header(id: 0xBEEF), questions: [Question(name: instanceName("Box"), type: .srv)])
        query.header.recursionDesired = true
        var start = lan.now
        lan.inject(query, to: a, from: legacy)
        lan.run(for: .milliseconds(200))
        let reply = try #require(lan.sent(by: a, since: start).first)
        #expect(reply.destination == .unicast(legacy))
        #expect(reply.message.header.id == 0xBEEF)
        #expect(reply.message.questions == query.questions)
        #expect(reply.message.answers.allSatisfy { $0.ttl <= 10 && !$0.cacheFlush })

        start = lan.now
        lan.inject(query, to: a, from: SocketAddress(.v4(IPv4Address(203, 0, 113, 9)), port: 40000), onLink: false)
        lan.run(for: .milliseconds(200))
        #expect(lan.sent(by: a, since: start).isEmpty)
    }

    @Test("withdrawing sends goodbyes; a browser reports the service lost within a second")
    func goodbye() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        let b = lan.addHost("beta")
        let id = a.core.register(registration("Box"))
        lan.run(for: .seconds(3))
        let browse = b.core.startQuery(name: agentType.domainName, type: .ptr)
        lan.run(for: .seconds(1))
        #expect(b.liveRecords(browse).count == 1)
        let start = lan.now
        a.core.unregister(id)
        lan.run(for: .milliseconds(500))
        let goodbye = try #require(lan.sent(by: a, since: start).first?.message)
        #expect(goodbye.answers.allSatisfy { $0.ttl == 0 })
        #expect(goodbye.answers.contains { $0.type == .ptr })
        lan.run(for: .milliseconds(600))
        #expect(b.liveRecords(browse).isEmpty)
    }

    @Test("a TXT update is announced; the browser's cache flushes the old TXT a second later")
    func txtUpdate() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        let b = lan.addHost("beta")
        let id = a.core.register(registration("Box", txt: ["version=1"]))
        lan.run(for: .seconds(3))
        let txtQuery = b.core.startQuery(name: instanceName("Box"), type: .txt)
        lan.run(for: .seconds(3))
        a.core.updateTXT(id, try DiscoveryInfo(["version=2"]))
        lan.run(for: .seconds(3))
        let live = b.liveRecords(txtQuery)
        #expect(live.count == 1)
        guard case .txt(let data)? = live.first?.data else { Issue.record("no TXT"); return }
        #expect(DiscoveryInfo(data).string(for: "version") == "2")
    }

    @Test("a probe for a name we are also probing is settled by the records: the lower set waits and is renamed")
    func probeTiebreak() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha", seed: 1)
        let b = lan.addHost("beta", seed: 1)  // same seed: same delays, truly simultaneous probes
        lan.run(for: .seconds(3))
        _ = a.core.register(registration("Same", port: 1000))
        _ = b.core.register(registration("Same", port: 2000))
        lan.run(for: .seconds(10))
        // SRV with port 2000 sorts after port 1000: beta wins the name, alpha becomes (2).
        #expect(b.registeredNames.first == instanceName("Same"))
        #expect(a.registeredNames.first == instanceName("Same (2)"))
    }

    @Test("after 15 conflicts in 10 s, probing slows to one probe per 5 s")
    func conflictRateLimit() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        lan.run(for: .seconds(2))
        let id = a.core.register(registration("Busy"))
        let rival = SocketAddress(.v4(IPv4Address(198, 18, 1, 66)), port: 5353)
        // A rival claims every name we try, as fast as we probe.
        for _ in 0..<16 {
            lan.run(for: .milliseconds(30))
            guard let name = a.core.name(of: id) else { break }
            let claim = Message(header: .response, answers: [
                ResourceRecord(name: name, data: .srv(SRVData(port: 1, target: "rival.local.")), ttl: 120, cacheFlush: true)
            ])
            lan.inject(claim, to: a, from: rival)
        }
        let start = lan.now
        lan.run(for: .seconds(12))
        let probeTimes = lan.wire.filter {
            $0.from == "alpha" && $0.time >= start && $0.message.isProbe && $0.message.questions.first?.name != "alpha.local."
        }.map(\.time)
        // While 15 conflicts lie within the last 10 s, every probe waits 5 s.
        #expect(probeTimes.count >= 2)
        #expect(probeTimes.first.map { $0 - start >= .seconds(4) } == true)
        if probeTimes.count >= 2 { #expect(probeTimes[1] - probeTimes[0] >= .seconds(5)) }
    }

    @Test("the host publishes IPv6 link-local addresses only when the interface has no routable IPv6 (avahi's rule)")
    func addressRecords() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        let linkLocal = try #require(IPv6Address("fe80::1"))
        let unique = try #require(IPv6Address("fd6e:6272:1::1"))
        a.core.setInterfaces([a.interface: [.v4(a.address), .v6(linkLocal, scope: a.interface.index), .v6(unique, scope: nil)]])
        _ = a.core.register(registration("Box"))
        lan.run(for: .seconds(3))
        let records = lan.sent(by: a).filter { $0.message.header.isResponse }.flatMap { $0.message.allRecords }
        #expect(records.contains { $0.data == .aaaa(unique) })
        #expect(records.contains { $0.data == .a(a.address) })
        #expect(!records.contains { $0.data == .aaaa(linkLocal) })

        let b = lan.addHost("bravo")
        b.core.setInterfaces([b.interface: [.v4(b.address), .v6(linkLocal, scope: b.interface.index)]])
        _ = b.core.register(registration("Other"))
        lan.run(for: .seconds(3))
        let onlyLinkLocal = lan.sent(by: b).filter { $0.message.header.isResponse }.flatMap { $0.message.allRecords }
        #expect(onlyLinkLocal.contains { $0.data == .aaaa(linkLocal) })
    }

    @Test("withdrawing one service keeps the shared records another still publishes; shutting down says goodbye for the host too")
    func goodbyesSpareSharedRecords() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        let one = a.core.register(registration("Box One"))
        _ = a.core.register(registration("Box Two"))
        lan.run(for: .seconds(4))
        var start = lan.now
        a.core.unregister(one)
        lan.run(for: .milliseconds(10))
        let goodbyes = lan.sent(by: a, since: start).flatMap { $0.message.answers }.filter { $0.ttl == 0 }
        #expect(goodbyes.contains { $0.name == instanceName("Box One") })
        // Box Two still makes "_services._dns-sd._udp PTR _openagents._tcp" true.
        #expect(!goodbyes.contains { $0.name == ServiceType.enumerationName() })
        start = lan.now
        a.core.unregisterAll()
        lan.run(for: .milliseconds(10))
        let last = lan.sent(by: a, since: start).flatMap { $0.message.answers }.filter { $0.ttl == 0 }
        #expect(last.contains { $0.name == ServiceType.enumerationName() })
        #expect(last.contains { $0.name == "alpha.local." && $0.type == .a })
    }

    @Test("renumbered (same interface, new address): the host says goodbye for the old address and announces the new one at once, without probing; a neighbour holds only the new one a second later")
    func renumbering() throws {
        let (lan, a, b) = SimulatedLAN.publishing("Box")
        let addressQuery = b.core.startQuery(name: "alpha.local.", type: .a)
        lan.run(for: .seconds(1))
        #expect(b.liveRecords(addressQuery).map(\.data) == [.a(a.address)])
        let renumbered = IPv4Address(198, 18, 1, 77)
        let start = lan.now
        lan.setInterfaces(of: a, [a.interface: [.v4(renumbered)]])
        lan.run(for: .milliseconds(1))
        let sent = lan.sent(by: a, since: start).map(\.message)
        #expect(!sent.contains { !$0.header.isResponse && !$0.authorities.isEmpty }, "probed again: \(sent)")
        let answers = sent.filter(\.header.isResponse).flatMap(\.answers)
        #expect(answers.contains { $0.data == .a(a.address) && $0.ttl == 0 }, "no goodbye for the old address: \(answers)")
        #expect(answers.contains { $0.data == .a(renumbered) && $0.ttl > 0 && $0.cacheFlush }, "the new address not announced: \(answers)")
        #expect(b.liveRecords(addressQuery).contains { $0.data == .a(renumbered) })
        // Goodbye: deleted one second later (§10.1).
        lan.run(for: .milliseconds(1010))
        #expect(b.liveRecords(addressQuery).map(\.data) == [.a(renumbered)])
        // Announced at least twice, a second apart (§8.3), like any update (§8.4).
        let announcements = lan.sent(by: a, since: start).filter { $0.message.header.isResponse && $0.message.answers.contains { $0.data == .a(renumbered) } }
        #expect(announcements.count >= 2)
    }

    @Test("a new interface is a link change: the host's names are probed again there (§8)")
    func newInterfaceProbes() throws {
        let (lan, a, _) = SimulatedLAN.publishing("Box")
        let start = lan.now
        let second = NetworkInterface(index: 3, name: "lan2")
        lan.setInterfaces(of: a, [a.interface: [.v4(a.address)], second: [.v4(IPv4Address(198, 18, 2, 1))]])
        lan.run(for: .seconds(2))
        let probes = lan.sent(by: a, since: start).filter { !$0.message.header.isResponse && !$0.message.authorities.isEmpty }
        #expect(probes.count >= 3)
    }
}
