// The only module that imports the host's interfaces. Inside a component
// componentize-js links these specifiers to the host's imports; natively,
// `jobhost/testing` registers a loader that points them at a fake host
// (see testing.js), so that reports and the SDK run under node too.
import * as source from 'jobhost:report/source@0.1.1';
import * as outbox from 'jobhost:report/outbox@0.1.1';
import * as log from 'jobhost:report/log@0.1.1';
import * as zone from 'jobhost:report/zone@0.1.1';

export { source, outbox, log, zone };
