import ArgumentParser
import PeerTrust

/// Peer IDs as people type them: the whole 54 characters, or any prefix of at least 4
/// characters that only one known peer has (as git takes short commit hashes).
enum PeerIDInput {
    /// The fewest characters (dashes aside) taken as the beginning of a peer ID: with fewer, a
    /// typo or a stray character matches some peer by chance.
    static let minimumPrefix = 4

    /// A peer ID typed as `text` for `what` ("--peer-id", "the peer ID"): a whole peer ID as it
    /// is, else the one entry of `known` that begins with it.
    /// - Throws: `ValidationError` saying that nothing matches (and where it looked) or which
    ///   entries do when several do.
    static func resolve(_ text: String, for what: String, among known: [(id: PeerID, label: String)], lookedIn place: String) throws -> PeerID {
        let whole: PeerIDError
        do { return try PeerID(parsing: text) } catch { whole = error }
        let typed = text.filter { $0 != "-" }.count
        guard typed >= minimumPrefix else {
            throw ValidationError(
                "\(what) \"\(text)\" is too short to be sure which peer it means: type at least \(minimumPrefix) characters of the peer ID (nearby trust list shows them)")
        }
        var seen = Set<PeerID>()
        let matches = known.filter { $0.id.hasPrefix(text) && seen.insert($0.id).inserted }
        switch matches.count {
        case 1:
            return matches[0].id
        case 0:
            // Say why it is not a whole peer ID too, in case it was meant as one (the peer ID's
            // own words without the text repeated).
            let why = whole.message.firstRange(of: "is not a peer ID: ").map { String(whole.message[$0.upperBound...]) } ?? whole.message
            throw ValidationError("\(what) \"\(text)\" is neither a whole peer ID (\(why)) nor the beginning of one in \(place)")
        default:
            let listed = matches.map { "\($0.id)" + ($0.label.isEmpty ? "" : " (\($0.label))") }.joined(separator: ", ")
            throw ValidationError("\(what) \"\(text)\" is ambiguous: \(matches.count) peer IDs in \(place) begin with it: \(listed); type more characters")
        }
    }

    /// The anchors and pins of a trust store, as known peer IDs.
    static func trusted(_ store: TrustStore) -> [(id: PeerID, label: String)] {
        let pins = ((try? store.pins()) ?? []).map { (id: $0.peerID, label: $0.name ?? "pinned") }
        let anchors = ((try? store.anchors()) ?? []).map { (id: $0.peerID, label: "anchor \($0.subject)") }
        return pins + anchors
    }
}
