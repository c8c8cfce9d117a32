import PeerConnection
import Testing

@testable import FileTransfer

/// The receiving side of a file's exchange, driven by hand: no stream, no disk.
@Suite("the receiver's exchange")
struct ReceiveExchangeTests {
    let offer = TransferProtocol.Offer(name: "build.tar", folders: ["out"], size: 1000, modified: nil, resume: true)

    func failure(_ steps: [ReceiveExchange.Step]) -> (FileTransferError, ExchangeReset?)? {
        guard case .failed(let error, let reset)? = steps.last else { return nil }
        return (error, reset)
    }

    /// An exchange that has taken `offer` and claimed a place for it with `offset` bytes to resume from.
    func claimed(offset: Int64, maximumSize: Int64? = nil) -> ReceiveExchange {
        var exchange = ReceiveExchange(maximumSize: maximumSize)
        _ = exchange.begin()
        _ = exchange.received(offer.json)
        _ = exchange.claimed(.success(offset))
        return exchange
    }

    /// A new file's exchange with all its bytes in, hashing to `sha256`, waiting for the trailer.
    func received(sha256: String) -> ReceiveExchange {
        var exchange = claimed(offset: 0)
        _ = exchange.spaceChecked(free: nil)
        _ = exchange.received(TransferProtocol.start(0))
        _ = exchange.bytesReceived(sha256: sha256)
        return exchange
    }

    @Test("a new file: claim, free space, accept at 0, the bytes, a matching trailer, publish, then saved is said")
    func wholeFile() {
        var exchange = ReceiveExchange(maximumSize: nil)
        #expect(exchange.begin() == [.readMessage])
        #expect(exchange.received(offer.json) == [.claim(offer)])
        #expect(exchange.claimed(.success(0)) == [.checkSpace])
        #expect(exchange.spaceChecked(free: 5000) == [.send(TransferProtocol.Answer.accept(offset: 0, prefixSHA256: nil).json), .readMessage])
        #expect(exchange.received(TransferProtocol.start(0)) == [.receiveBytes(from: 0)])
        #expect(exchange.bytesReceived(sha256: "abcd") == [.readMessage])
        #expect(exchange.received(TransferProtocol.trailer(sha256: "ABCD")) == [.publish])
        #expect(exchange.published(.success(["out", "build (2).tar"])) == [
            .tellAndFinish(TransferProtocol.saved("out/build (2).tar")), .saved(savedAs: "out/build (2).tar", start: 0),
        ])
        #expect(exchange.phase == .done)
    }

    @Test("a resume offers the .part's length and digest; the sender may take the offset or 0, nothing else")
    func resume() throws {
        var exchange = claimed(offset: 400)
        #expect(exchange.phase == .hashingPrefix)
        #expect(exchange.prefixHashed("feed") == [.checkSpace])
        #expect(exchange.spaceChecked(free: 600) == [.send(TransferProtocol.Answer.accept(offset: 400, prefixSHA256: "feed").json), .readMessage])
        var restart = exchange
        #expect(exchange.received(TransferProtocol.start(400)) == [.receiveBytes(from: 400)])
        #expect(restart.received(TransferProtocol.start(0)) == [.receiveBytes(from: 0)])
        var other = claimed(offset: 400)
        _ = other.prefixHashed("feed")
        _ = other.spaceChecked(free: nil)
        let (error, reset) = try #require(failure(other.received(TransferProtocol.start(200))))
        #expect(error.code == .protocolError && reset?.code == .protocolError)
    }

    @Test("offers are declined, with the reason told to the sender, for a bad name, a size over the limit, no place, no space")
    func declines() throws {
        var badName = ReceiveExchange(maximumSize: nil)
        _ = badName.begin()
        let named = badName.received(TransferProtocol.Offer(name: "..", size: 1, modified: nil, resume: false).json)
        #expect(named.first.map { if case .tellAndFinish = $0 { true } else { false } } == true)
        #expect(try #require(failure(named)).0.code == .declined)

        var large = ReceiveExchange(maximumSize: 999)
        _ = large.begin()
        let (tooLarge, _) = try #require(failure(large.received(offer.json)))
        #expect(tooLarge == FileTransferError(.declined, "declined out/build.tar: 1000 bytes is over the 999 this side takes"))

        var nowhere = ReceiveExchange(maximumSize: nil)
        _ = nowhere.begin()
        _ = nowhere.received(offer.json)
        let placed = nowhere.claimed(.failure(FileTransferError(.file, "build.tar and 999 numbered names after it are taken")))
        #expect(placed.first == .tellAndFinish(TransferProtocol.Answer.decline("build.tar and 999 numbered names after it are taken").json))

        var full = claimed(offset: 400)
        _ = full.prefixHashed("feed")
        let (noSpace, reset) = try #require(failure(full.spaceChecked(free: 599)))
        #expect(noSpace == FileTransferError(.declined, "declined out/build.tar: not enough space: 600 bytes needed, 599 free"))
        #expect(reset == nil)
    }

    @Test("bytes that hash differently are discarded and the sender hears it was a verification failure")
    func verification() throws {
        var exchange = received(sha256: "aaaa1111")
        let steps = exchange.received(TransferProtocol.trailer(sha256: "bbbb2222"))
        #expect(steps.first == .discardPart)
        guard case .tellAndFinish(let told)? = steps.dropFirst().first else { Issue.record("\(steps)"); return }
        #expect(told["kind"]?.stringValue == "verification")
        #expect(try #require(failure(steps)).0.code == .verification)
    }

    @Test("messages that break the rules are protocol errors and reset the stream", arguments: [0, 1, 2])
    func broken(_ which: Int) throws {
        var exchange = ReceiveExchange(maximumSize: nil)
        _ = exchange.begin()
        let steps: [ReceiveExchange.Step]
        switch which {
        case 0: steps = exchange.received(nil)
        case 1: steps = exchange.received(.object(["size": .integer(3)]))
        default:
            exchange = received(sha256: "aa")
            steps = exchange.received(.object(["sha": .string("aa")]))
        }
        let (error, reset) = try #require(failure(steps))
        #expect(error.code == .protocolError && reset?.code == .protocolError)
    }

    @Test("a file that cannot be published is reported to the sender as a file failure")
    func publishFails() throws {
        var exchange = received(sha256: "aa")
        _ = exchange.received(TransferProtocol.trailer(sha256: "aa"))
        let steps = exchange.published(.failure(FileTransferError(.file, "cannot save out/build.tar: no permission")))
        #expect(steps.first == .tellAndFinish(TransferProtocol.failed("cannot save out/build.tar: no permission", kind: .file)))
        #expect(try #require(failure(steps)).0.code == .file)
    }

    @Test("events out of order end the exchange instead of going on")
    func misuse() throws {
        var exchange = ReceiveExchange(maximumSize: nil)
        let (error, _) = try #require(failure(exchange.bytesReceived(sha256: "00")))
        #expect(error.message.hasPrefix("internal error"))
        #expect(exchange.phase == .done)
        #expect(failure(exchange.received(offer.json)) != nil)
    }
}
