import DNSWire
import MulticastDNSCore
import Testing

@Suite("Querier: continuous queries, cache, refresh, failure detection")
struct QuerierTests {
    @Test("the first query goes out at once, then after 1, 2, 4, 8 … seconds")
    func queryIntervals() {
        let lan = SimulatedLAN()
        let b = lan.addHost("beta")
        lan.run(for: .seconds(2))
        let start = lan.now
        _ = b.core.startQuery(name: agentType.domainName, type: .ptr)
        lan.run(for: .seconds(40))
        let times = lan.wire.filter {
            $0.from == "beta" && $0.time >= start && !$0.message.header.isResponse && !$0.message.isProbe
                && $0.message.questions.first?.name == agentType.domainName
        }.map { $0.time - start }
        #expect(Array(times.prefix(6)) == [.zero, .seconds(1), .seconds(3), .seconds(7), .seconds(15), .seconds(31)])
        // The first asks for unicast replies (QU, §5.4), the rest do not.
        let questions = lan.wire.filter {
            $0.from == "beta" && $0.time >= start && !$0.message.header.isResponse && $0.message.questions.first?.name == agentType.domainName
        }.compactMap { $0.message.questions.first }
        #expect(questions.first?.unicastResponse == true)
        #expect(questions.dropFirst().allSatisfy { !$0.unicastResponse })
    }

    @Test("queries carry known answers with more than half their TTL left, so the responder stays quiet")
    func knownAnswersInQueries() throws {
        let (lan, _, b) = SimulatedLAN.publishing("Box")
        _ = b.core.startQuery(name: agentType.domainName, type: .ptr)
        lan.run(for: .seconds(2))
        let start = lan.now
        lan.run(for: .seconds(20))
        let queries = lan.wire.filter { $0.from == "beta" && $0.time >= start && !$0.message.header.isResponse && !$0.message.isProbe }
        #expect(!queries.isEmpty)
        #expect(queries.allSatisfy { $0.message.answers.contains { $0.data == .ptr(instanceName("Box")) } })
        let answers = lan.wire.filter { $0.from == "alpha" && $0.time >= start && $0.message.answers.contains { $0.type == .ptr && $0.name == agentType.domainName } }
        #expect(answers.isEmpty)
    }

    @Test("a live responder keeps a record fresh for hours through refresh queries at 80-95 % of its TTL")
    func refreshKeepsAlive() throws {
        let (lan, _, b) = SimulatedLAN.publishing("Box")
        let srvQuery = b.core.startQuery(name: instanceName("Box"), type: .srv)
        lan.run(for: .seconds(1))
        #expect(b.liveRecords(srvQuery).count == 1)
        lan.run(for: .seconds(3 * 3600))
        #expect(b.liveRecords(srvQuery).count == 1)
        #expect(!b.events.contains { if case .recordRemoved = $0 { return true } else { return false } })
    }

    @Test("a responder that vanishes without a goodbye is forgotten when its SRV TTL runs out")
    func expiry() throws {
        let (lan, a, b) = SimulatedLAN.publishing("Box")
        let srvQuery = b.core.startQuery(name: instanceName("Box"), type: .srv)
        lan.run(for: .seconds(1))
        let crash = lan.now
        a.isUp = false  // SIGKILL: no goodbye
        // The first refresh query goes at 80 % of 120 s: until then the record stands.
        lan.run(for: .seconds(95))
        #expect(b.liveRecords(srvQuery).count == 1)
        // Unanswered refreshes flush it (§10.5), at the latest when the TTL runs out.
        lan.run(for: .seconds(26))
        #expect(b.liveRecords(srvQuery).isEmpty)
        // The refresh queries at 80-95 % went out, unanswered.
        let refreshes = lan.wire.filter { $0.from == "beta" && $0.time > crash && $0.message.questions.contains { $0.name == instanceName("Box") && $0.type == .srv } }
        #expect(refreshes.count >= 2)
    }

    @Test("failure detection: two unanswered queries for a cached PTR flush it within about ten seconds")
    func failureDetection() throws {
        let (lan, a, b) = SimulatedLAN.publishing("Box")
        let browse = b.core.startQuery(name: agentType.domainName, type: .ptr)
        lan.run(for: .seconds(2))
        #expect(b.liveRecords(browse).count == 1)
        a.isUp = false
        // A newcomer browses: its queries list no known answers, so b sees them go unanswered.
        let c = lan.addHost("gamma")
        let start = lan.now
        _ = c.core.startQuery(name: agentType.domainName, type: .ptr)
        lan.run(for: .seconds(12))
        #expect(b.liveRecords(browse).isEmpty)
        let removal = b.events.contains { if case .recordRemoved(browse, _, _) = $0 { return true } else { return false } }
        #expect(removal)
        #expect(lan.now - start <= .seconds(12))  // long before the PTR's 4500 s TTL
    }

    @Test("reconfirm (§10.4): asked twice without listing the record, a gone host's PTR is flushed within about eleven seconds; a live one stays")
    func reconfirm() throws {
        let (lan, a, b) = SimulatedLAN.publishing("Box")
        let browse = b.core.startQuery(name: agentType.domainName, type: .ptr)
        lan.run(for: .seconds(30))
        let record = try #require(b.liveRecords(browse).first)
        // While its owner answers, a reconfirm changes nothing.
        let before = lan.now
        b.core.reconfirm(record)
        lan.run(for: .seconds(1))
        b.core.reconfirm(record)
        lan.run(for: .seconds(12))
        #expect(b.liveRecords(browse).count == 1)
        let asked = lan.wire.filter { $0.from == "beta" && $0.time >= before && !$0.message.header.isResponse && $0.message.questions.contains { $0.name == agentType.domainName } }
        // The browse's own queries list it as known; the two reconfirming ones do not.
        #expect(asked.filter { !$0.message.answers.contains { $0.data == record.data } }.count == 2, "\(asked.map(\.message.answers))")
        // Its owner gone without a goodbye: no other query would notice for an hour (4500 s).
        a.isUp = false
        let gone = lan.now
        b.core.reconfirm(record)
        lan.run(for: .seconds(1))
        b.core.reconfirm(record)
        lan.run(for: .seconds(11))
        #expect(b.liveRecords(browse).isEmpty)
        #expect(b.events.contains { if case .recordRemoved(browse, _, _) = $0 { true } else { false } })
        #expect(lan.now - gone <= .seconds(12))
        #expect(b.core.statistics.reconfirmQueries == 4)
    }

    @Test("records already cached are reported to a new query at once")
    func cachedResultsForNewQueries() throws {
        let (lan, _, b) = SimulatedLAN.publishing("Box")
        let first = b.core.startQuery(name: agentType.domainName, type: .ptr)
        lan.run(for: .seconds(1))
        b.core.stopQuery(first)
        let second = b.core.startQuery(name: agentType.domainName, type: .ptr)
        let immediate = b.core.takeEvents()
        #expect(immediate.contains { if case .recordAdded(second, _, _) = $0 { return true } else { return false } })
    }

    @Test("a new interface makes names probe and announce again there")
    func interfaceChange() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        _ = a.core.register(registration("Box"))
        lan.run(for: .seconds(4))
        let start = lan.now
        let wifi = NetworkInterface(index: 3, name: "wlan0")
        a.core.setInterfaces([a.interface: [.v4(a.address)], wifi: [.v4(IPv4Address(198, 18, 2, 1))]])
        lan.run(for: .seconds(4))
        let out = a.core.takeOutgoing()  // nothing left over: all delivered during run
        #expect(out.isEmpty)
        let sentOnWifi = lan.wire.filter { $0.from == "alpha" && $0.time >= start && $0.interface == "wlan0" }
        #expect(sentOnWifi.contains { $0.message.isProbe })
        #expect(sentOnWifi.contains { $0.message.header.isResponse && $0.message.answers.contains { $0.type == .srv } })
    }

    @Test("duplicate question suppression: two browsers of one type share the queries instead of doubling them (§7.3)")
    func duplicateQuestionSuppression() throws {
        let (lan, _, b) = SimulatedLAN.publishing("Box")
        let c = lan.addHost("gamma")
        let start = lan.now
        _ = b.core.startQuery(name: agentType.domainName, type: .ptr)
        lan.run(for: .milliseconds(300))
        _ = c.core.startQuery(name: agentType.domainName, type: .ptr)
        lan.run(for: .seconds(40))
        let queries = lan.wire.filter {
            ["beta", "gamma"].contains($0.from) && $0.time >= start && !$0.message.header.isResponse
                && $0.message.questions.contains { $0.name == agentType.domainName }
        }
        // Alone, each would ask at 0, 1, 3, 7, 15 and 31 s: 12 queries between them.
        #expect(queries.count < 12)
        #expect(b.core.statistics.duplicateQuestionsSuppressed + c.core.statistics.duplicateQuestionsSuppressed > 0)
        // Neither lost sight of the service.
        #expect(!b.core.cachedRecords(name: agentType.domainName, type: .ptr).isEmpty)
        #expect(!c.core.cachedRecords(name: agentType.domainName, type: .ptr).isEmpty)
    }

    @Test("a question we would ask with more known answers than theirs is not suppressed (§7.3)")
    func duplicateQuestionNotSuppressedWhenTheyKnowMore() throws {
        let (lan, _, b) = SimulatedLAN.publishing("Box")
        _ = b.core.startQuery(name: agentType.domainName, type: .ptr)
        lan.run(for: .milliseconds(2900))
        // Another host asks the same question listing a PTR we do not have: its answers would
        // leave that one out, so beta must still ask for itself.
        let stranger = ResourceRecord(name: agentType.domainName, data: .ptr(instanceName("Elsewhere")), ttl: 4500)
        lan.inject(Message(questions: [Question(name: agentType.domainName, type: .ptr)], answers: [stranger]), to: b,
                   from: SocketAddress(.v4(IPv4Address(198, 18, 1, 40)), port: 5353))
        let start = lan.now
        lan.run(for: .milliseconds(200))
        #expect(b.core.statistics.duplicateQuestionsSuppressed == 0)
        #expect(lan.sent(by: b, since: start).contains { $0.message.questions.contains { $0.name == agentType.domainName } })
    }

    @Test("duplicate answer suppression: of two responders holding the same shared record, only one answers (§7.4)")
    func duplicateAnswerSuppression() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        let d = lan.addHost("delta")
        _ = a.core.register(registration("Box One"))
        _ = d.core.register(registration("Box Two"))
        lan.run(for: .seconds(40))
        // Both hold "_services._dns-sd._udp.local. PTR _openagents._tcp.local.", a shared
        // record, and answer a multicast question for it after 20–120 ms: the later one hears
        // the first answer and keeps quiet.
        let start = lan.now
        let enumeration = ServiceType.enumerationName()
        let question = Message(questions: [Question(name: enumeration, type: .ptr)])
        let asker = SocketAddress(.v4(IPv4Address(198, 18, 1, 60)), port: 5353)
        lan.inject(question, to: a, from: asker)
        lan.inject(question, to: d, from: asker)
        lan.run(for: .milliseconds(500))
        let answers = lan.wire.filter {
            ["alpha", "delta"].contains($0.from) && $0.time >= start && $0.message.answers.contains { $0.name == enumeration }
        }
        #expect(answers.count == 1)
        #expect(a.core.statistics.duplicateAnswersSuppressed + d.core.statistics.duplicateAnswersSuppressed == 1)
    }

    @Test("known answers that do not fit one query go on in further packets, the first ones marked TC (§7.2)")
    func multiPacketKnownAnswers() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        let b = lan.addHost("beta")
        for index in 0..<60 { _ = a.core.register(registration("Box number \(index) with a long name to fill packets")) }
        lan.run(for: .seconds(10))
        _ = b.core.startQuery(name: agentType.domainName, type: .ptr)
        lan.run(for: .seconds(2))
        let start = lan.now
        // Beta asks again (after 2 s more) with 60 known answers: more than one packet holds.
        lan.run(for: .seconds(3))
        let queries = lan.wire.filter { $0.from == "beta" && $0.time >= start && !$0.message.header.isResponse }
        let packets = try queries.flatMap { try $0.message.encodedPackets() }.map { try Message(decoding: $0) }
        #expect(packets.count >= 2)
        #expect(packets.dropLast().allSatisfy { $0.header.isTruncated })
        #expect(packets.last?.header.isTruncated == false)
        #expect(packets.reduce(0) { $0 + $1.answers.count } == 60)
        // And alpha, having all 60 listed, answers none of them again.
        let answersAfter = lan.wire.filter { $0.from == "alpha" && $0.time >= start && $0.message.answers.contains { $0.type == .ptr && $0.name == agentType.domainName } }
        #expect(answersAfter.isEmpty)
    }

    @Test("a unicast response we did not ask for, or from off the link, is not cached (§6, §11)")
    func unaskedUnicastResponsesRefused() throws {
        let lan = SimulatedLAN()
        let b = lan.addHost("beta")
        lan.run(for: .seconds(5))
        let forged = ResourceRecord(name: instanceName("Forged"), data: .srv(SRVData(port: 1, target: "evil.local.")), ttl: 120)
        let response = Message(header: .response, answers: [forged])
        let onLink = SocketAddress(.v4(IPv4Address(198, 18, 1, 66)), port: 5353)
        // No QU question of ours in the last two seconds: refused.
        b.core.receive(ReceivedMessage(message: response, source: onLink, interface: b.interface, family: .v4,
                                       destinationIsMulticast: false), at: lan.now)
        #expect(b.core.cachedRecords(name: instanceName("Forged"), type: .srv).isEmpty)
        // Right after a QU query: taken from the link, refused from elsewhere.
        _ = b.core.startQuery(name: instanceName("Forged"), type: .srv)
        lan.run(for: .milliseconds(10))
        let offLink = SocketAddress(.v4(IPv4Address(203, 0, 113, 5)), port: 5353)
        b.core.receive(ReceivedMessage(message: response, source: offLink, interface: b.interface, family: .v4,
                                       sourceIsOnLink: false, destinationIsMulticast: false), at: lan.now)
        #expect(b.core.cachedRecords(name: instanceName("Forged"), type: .srv).isEmpty)
        b.core.receive(ReceivedMessage(message: response, source: onLink, interface: b.interface, family: .v4,
                                       destinationIsMulticast: false), at: lan.now)
        #expect(b.core.cachedRecords(name: instanceName("Forged"), type: .srv).count == 1)
        #expect(b.core.statistics.unicastResponsesRefused == 2)
    }

    @Test("known answers never carry the cache-flush bit (§10.2)")
    func knownAnswersWithoutCacheFlush() throws {
        let (lan, _, b) = SimulatedLAN.publishing("Box")
        // ANY: a question that the cached unique records do not settle, so it is asked with them as known answers.
        _ = b.core.startQuery(name: instanceName("Box"), type: .any)
        lan.run(for: .seconds(4))
        let queries = lan.wire.filter { $0.from == "beta" && !$0.message.header.isResponse }
        let known = queries.flatMap { $0.message.answers }
        #expect(known.contains { $0.type == .srv })
        #expect(known.allSatisfy { !$0.cacheFlush })
    }

    @Test("sharing port 5353 with another stack on the machine, queries and probes ask for multicast replies only (§15.1)")
    func noUnicastRepliesWhenPortShared() throws {
        let lan = SimulatedLAN()
        let a = lan.addHost("alpha")
        a.core.unicastRepliesReachUs = false
        _ = a.core.startQuery(name: agentType.domainName, type: .ptr)
        _ = a.core.register(registration("Box"))
        lan.run(for: .seconds(3))
        let questions = lan.sent(by: a).filter { !$0.message.header.isResponse }.flatMap { $0.message.questions }
        #expect(questions.contains { $0.name == agentType.domainName })
        #expect(questions.contains { $0.type == .any })  // probes went out
        #expect(questions.allSatisfy { !$0.unicastResponse })
    }
}
