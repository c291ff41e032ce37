// A WebSub subscriber written with the published npm package pubsubhubbub
// (1.0.2), code nobody here wrote: the interop test runs it against the
// relay's hub. It prints one JSON object per line on stdout:
//   {"event":"listen"}            the callback server is up
//   {"event":"subscribe", ...}    the hub verified intent
//   {"event":"feed", "body": ...} a delivery whose signature verified
//   {"event":"denied"|"error", ...}
// Environment: HUB, TOPIC, PORT, SECRET (optional), TOKEN (optional,
// sent as Authorization: Bearer on the subscription request).
'use strict';
const pubsubhubbub = require('pubsubhubbub');
const crypto = require('crypto');

const out = o => process.stdout.write(JSON.stringify(o) + '\n');
const headers = {};
if (process.env.TOKEN) headers.Authorization = 'Bearer ' + process.env.TOKEN;
const secret = process.env.SECRET || false;
const sub = pubsubhubbub.createServer({
    callbackUrl: 'http://127.0.0.1:' + process.env.PORT + '/callback',
    secret: secret,
    headers: headers,
    leaseSeconds: 3600
});
sub.on('listen', () => {
    out({ event: 'listen' });
    sub.subscribe(process.env.TOPIC, process.env.HUB, err => {
        if (err) out({ event: 'error', error: String(err), body: err.responseBody || '' });
        else out({ event: 'requested' });
    });
    if (secret) {
        // pubsubhubbub 1.0.2 sends hub.secret = hex(HMAC-SHA1(secret, topic))
        // but checks X-Hub-Signature with the raw secret; use the value the
        // hub was given, as the package's own hub-side code would expect.
        sub.secret = crypto.createHmac('sha1', secret).update(process.env.TOPIC).digest('hex');
    }
});
sub.on('subscribe', d => out({ event: 'subscribe', topic: d.topic, lease: d.lease }));
sub.on('denied', d => out({ event: 'denied', topic: d.topic, error: String(d.error || '') }));
sub.on('error', e => out({ event: 'error', error: String(e) }));
sub.on('feed', d => out({ event: 'feed', topic: d.topic, contentType: d.headers['content-type'], signature: d.headers['x-hub-signature'] || '', body: d.feed.toString('utf8') }));
sub.listen(Number(process.env.PORT), '127.0.0.1');
